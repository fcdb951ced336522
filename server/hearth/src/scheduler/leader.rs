//! Leadership: the scheduler lease (a session-level Postgres advisory lock
//! on a dedicated connection) and which replica holds it.
//!
//! The leader names its lease connection after itself (`application_name`),
//! so any replica finds the leader from the lock itself (`pg_locks` joined
//! with `pg_stat_activity`): the answer is never older than the lock, and
//! there is no record to go stale when a leader dies.

use std::time::Duration;

use super::{LEASE_KEY, Scheduler};

/// Prefix of a lease connection's `application_name`.
const NAME_PREFIX: &str = "hearth-leader";

/// This replica, as others see it when it leads.
#[derive(Debug, Clone)]
pub(super) struct Replica {
    /// Random, new at every start (`hearth serve` logs it).
    pub(super) id: String,
    pub(super) host: String,
}

impl Replica {
    pub(super) fn new() -> Replica {
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

    /// The lease connection's `application_name`: Postgres keeps 63 bytes,
    /// so a long host name is cut, never the id.
    fn application_name(&self) -> String {
        let mut name = format!("{NAME_PREFIX} {} {}", self.id, self.host);
        let mut end = name.len().min(63);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
        name
    }
}

/// Which replica leads, as the replica answering sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// This replica leads.
    pub is_self: bool,
    /// The leading replica's id; `None` while none leads (a takeover).
    pub replica_id: Option<String>,
    /// Its host name (possibly cut).
    pub host: Option<String>,
}

/// The replica a lease connection's `application_name` names.
fn parse_name(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix(NAME_PREFIX)?.strip_prefix(' ')?;
    let (id, host) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((id.to_owned(), host.to_owned()))
}

impl Scheduler {
    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        &self.inner.replica.id
    }

    /// Whether this replica schedules now.
    pub fn is_leading(&self) -> bool {
        self.state().leading
    }

    /// Which replica leads: this one, or the one holding the lease in the
    /// store.
    pub async fn leader(&self) -> Result<Leader, hearth_store::Error> {
        if self.is_leading() {
            return Ok(Leader {
                is_self: true,
                replica_id: Some(self.inner.replica.id.clone()),
                host: Some(self.inner.replica.host.clone()),
            });
        }
        // A bigint advisory key is split into two 32-bit halves.
        let (high, low) = (LEASE_KEY >> 32, LEASE_KEY & 0xffff_ffff);
        let name = sqlx::query_scalar!(
            r#"select a.application_name as "name!"
               from pg_locks l join pg_stat_activity a on a.pid = l.pid
               where l.locktype = 'advisory' and l.granted
                 and l.database = (select oid from pg_database where datname = current_database())
                 and l.classid = $1::bigint::oid and l.objid = $2::bigint::oid
                 and l.objsubid = 1"#,
            high,
            low
        )
        .fetch_optional(&self.inner.db)
        .await
        .map_err(hearth_store::Error::from)?;
        let named = name.as_deref().and_then(parse_name);
        Ok(Leader {
            is_self: false,
            replica_id: named.as_ref().map(|(id, _)| id.clone()),
            host: named.map(|(_, host)| host).filter(|h| !h.is_empty()),
        })
    }

    /// Holds the scheduler lease: a session-level advisory lock on a
    /// dedicated connection, kept for the life of the process or until a
    /// shutdown drains it. `None` if the service began shutting down first.
    pub(super) async fn acquire_lease(&self) -> Option<sqlx::PgConnection> {
        let mut waiting_logged = false;
        loop {
            if self.state().draining {
                return None;
            }
            let attempt = async {
                let mut conn = self.inner.db.acquire().await?;
                let got: bool =
                    sqlx::query_scalar!(r#"select pg_try_advisory_lock($1) as "got!""#, LEASE_KEY)
                        .fetch_one(&mut *conn)
                        .await?;
                if !got {
                    return Ok::<_, sqlx::Error>(None);
                }
                // Only a name: failing to set it must not hand a connection
                // that holds the lock back to the pool.
                if let Err(e) = sqlx::query_scalar!(
                    r#"select set_config('application_name', $1, false) as "name!""#,
                    self.inner.replica.application_name()
                )
                .fetch_one(&mut *conn)
                .await
                {
                    tracing::warn!(error = %e, "naming the lease connection failed; other replicas cannot say who leads");
                }
                Ok(Some(conn))
            };
            match attempt.await {
                Ok(Some(conn)) => {
                    tracing::info!(replica_id = %self.inner.replica.id, "scheduler lease acquired");
                    return Some(conn.detach());
                }
                Ok(None) if !waiting_logged => {
                    tracing::info!("another scheduler leads; waiting for the lease");
                    waiting_logged = true;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "taking the scheduler lease failed"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_carry_the_replica_and_fit_postgres() {
        let r = Replica {
            id: "0123456789ab".to_owned(),
            host: "h".repeat(80),
        };
        let name = r.application_name();
        assert_eq!(name.len(), 63);
        let (id, host) = parse_name(&name).unwrap();
        assert_eq!(id, "0123456789ab");
        assert!(host.starts_with("hhh"));
        assert_eq!(
            parse_name("hearth-leader abc web-1"),
            Some(("abc".to_owned(), "web-1".to_owned()))
        );
        assert_eq!(parse_name("psql"), None);
    }
}
