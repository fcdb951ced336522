//! Who this process is among the replicas that share a database, and
//! whether any other is there.
//!
//! A replica names every connection it opens after itself in
//! `application_name`: `hearth <id>`, and the leader's lease connection
//! `hearth-leader <id> <host>`. So any replica sees the others in
//! `pg_stat_activity` (which shows every role's application names), and the
//! leader in `pg_locks` joined with it, without a record of its own that
//! could go stale: a replica's sessions go with it.
//!
//! A lone replica has nobody to tell of its jobs' changes, and telling them
//! to nobody costs a statement for most jobs. The hub asks [`Company`]
//! before announcing; a replica that starts says hello on the channel the
//! others listen on, so they start announcing at once rather than at their
//! next look.

use std::time::{Duration, Instant};

use sqlx::PgPool;

/// First word of the name of every connection of a replica's pools.
const POOL_PREFIX: &str = "hearth";
/// First word of the name of the leader's lease connection.
const LEASE_PREFIX: &str = "hearth-leader";
/// First word of the notification a replica sends when it starts listening.
const HELLO: &str = "hello";
/// How long an answer to "is another replica there?" is trusted.
const RECHECK: Duration = Duration::from_secs(1);

/// This replica, as the others see it.
#[derive(Debug, Clone)]
pub struct Replica {
    /// Random, new at every start (`hearth serve` logs it).
    pub id: String,
    pub host: String,
}

impl Replica {
    pub fn new() -> Replica {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_owned());
        Replica {
            id: uuid::Uuid::new_v4().simple().to_string()[..12].to_owned(),
            host,
        }
    }

    /// The `application_name` of this replica's pooled connections.
    pub fn pool_name(&self) -> String {
        format!("{POOL_PREFIX} {}", self.id)
    }

    /// The lease connection's `application_name`: Postgres keeps 63 bytes,
    /// so a long host name is cut, never the id.
    pub fn lease_name(&self) -> String {
        let mut name = format!("{LEASE_PREFIX} {} {}", self.id, self.host);
        let mut end = name.len().min(63);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
        name
    }

    /// The notification this replica sends when it starts listening.
    pub fn hello(&self) -> String {
        format!("{HELLO} {}", self.id)
    }

    /// Whether `payload` is another replica's [`Replica::hello`].
    pub fn is_hello_from_another(&self, payload: &str) -> bool {
        payload
            .strip_prefix(HELLO)
            .and_then(|rest| rest.strip_prefix(' '))
            .is_some_and(|id| !id.is_empty() && id != self.id)
    }
}

impl Default for Replica {
    fn default() -> Self {
        Replica::new()
    }
}

/// The replica a lease connection's `application_name` names: its id and
/// host (possibly cut).
pub fn parse_lease_name(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix(LEASE_PREFIX)?.strip_prefix(' ')?;
    let (id, host) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((id.to_owned(), host.to_owned()))
}

/// Whether a session of another replica is connected to the database.
async fn others_connected(db: &PgPool, own_id: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select exists(
             select 1 from pg_stat_activity
             where datname = current_database()
               and split_part(application_name, ' ', 1) = any($1::text[])
               and split_part(application_name, ' ', 2) not in ('', $2)
           ) as "others!""#,
        &[POOL_PREFIX, LEASE_PREFIX] as &[&str],
        own_id
    )
    .fetch_one(db)
    .await
}

/// Whether another replica may be listening, as the announcer last learned:
/// asked of the store at most once a [`RECHECK`], and true at once when
/// another replica said hello. Where the store cannot answer, the answer is
/// yes: an announcement too many only costs a statement.
#[derive(Debug)]
pub struct Company {
    own_id: String,
    known: Option<(bool, Instant)>,
}

impl Company {
    pub fn new(own_id: String) -> Company {
        Company {
            own_id,
            known: None,
        }
    }

    /// Whether to announce now; `hello` says another replica just said
    /// hello.
    pub async fn present(&mut self, db: &PgPool, hello: bool) -> bool {
        let now = Instant::now();
        if hello {
            self.known = Some((true, now));
        }
        if let Some((present, at)) = self.known
            && now.duration_since(at) < RECHECK
        {
            return present;
        }
        let present = others_connected(db, &self.own_id)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "looking for other replicas failed; announcing anyway");
                true
            });
        if self.known.is_none_or(|(was, _)| was != present) {
            tracing::debug!(present, "other replicas");
        }
        self.known = Some((present, Instant::now()));
        present
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: &str, host: &str) -> Replica {
        Replica {
            id: id.to_owned(),
            host: host.to_owned(),
        }
    }

    #[test]
    fn lease_names_carry_the_replica_and_fit_postgres() {
        let r = replica("0123456789ab", &"h".repeat(80));
        let name = r.lease_name();
        assert_eq!(name.len(), 63);
        let (id, host) = parse_lease_name(&name).unwrap();
        assert_eq!(id, "0123456789ab");
        assert!(host.starts_with("hhh"));
        assert_eq!(
            parse_lease_name("hearth-leader abc web-1"),
            Some(("abc".to_owned(), "web-1".to_owned()))
        );
        assert_eq!(parse_lease_name("psql"), None);
        assert_eq!(parse_lease_name(&r.pool_name()), None);
        // A multi-byte host is cut on a character boundary.
        let name = replica("0123456789ab", &"é".repeat(40)).lease_name();
        assert!(name.len() <= 63 && name.ends_with('é'));
    }

    #[sqlx::test(migrations = "../../migrations")]
    async fn company_is_another_replicas_session_on_the_same_database(pool: PgPool) {
        use sqlx::Connection;
        let connect = |name: &str| {
            let options = (*pool.connect_options()).clone().application_name(name);
            async move { sqlx::PgConnection::connect_with(&options).await.unwrap() }
        };
        let alone = async |own: &str| !Company::new(own.to_owned()).present(&pool, false).await;
        // The test's own sessions, this replica's, and names that only look
        // alike are nobody.
        let mut held = Vec::new();
        for name in [
            "hearth me",
            "hearth-leader me web-1",
            "hearthly x",
            "psql",
            "hearth",
        ] {
            held.push(connect(name).await);
        }
        assert!(alone("me").await);
        // Another replica's pooled connection or lease is company.
        let other = connect("hearth other").await;
        assert!(!alone("me").await);
        assert!(!alone("other").await, "and `me` is company to it");
        assert!(!alone("third").await);
        drop(other);
        let lease = connect("hearth-leader other web-2").await;
        assert!(!alone("me").await);
        lease.close().await.unwrap();
        // Gone with its sessions; the answer is kept for a while, and a hello
        // makes it yes at once.
        let mut company = Company::new("me".to_owned());
        let mut gone = false;
        for _ in 0..100 {
            if !company.present(&pool, false).await {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone, "a closed session stays in pg_stat_activity");
        assert!(company.present(&pool, true).await, "a hello is company");
        assert!(company.present(&pool, false).await, "and stays so a while");
        drop(held);
    }

    #[test]
    fn hellos_name_their_replica() {
        let (a, b) = (replica("aaaa", "h"), replica("bbbb", "h"));
        assert!(b.is_hello_from_another(&a.hello()));
        assert!(!a.is_hello_from_another(&a.hello()), "its own hello");
        for other in ["hello", "hello ", "helloaaaa", "{\"job\":1}", ""] {
            assert!(!a.is_hello_from_another(other), "{other:?}");
        }
    }
}
