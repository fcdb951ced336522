//! Client side of the agent protocol ([`hearth_core::agent`]): JSON lines
//! both ways, one exchange at a time on a connection.
//!
//! A connection whose exchange ended with its final frame is kept, idle, for
//! the next exchange with the same agent, so that a pod's jobs share one
//! connection rather than opening one each. A kept connection the agent has
//! closed meanwhile (it restarted, its pod went) is found out before any
//! frame arrives, and the exchange is opened again on a new connection.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hearth_core::agent::{Envelope, Frame, Request, Run};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines, ReadHalf, WriteHalf,
};

use crate::Error;

trait Conn: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Conn for T {}

type Reader = Lines<BufReader<ReadHalf<Box<dyn Conn>>>>;
type Writer = WriteHalf<Box<dyn Conn>>;

/// Connections kept per agent at most (a pod runs its jobs one at a time;
/// a multi-rank job or a concurrent wipe or status may need another).
const KEPT_PER_AGENT: usize = 2;
/// How long a connection is kept idle.
const KEPT_FOR: Duration = Duration::from_secs(60);

/// Connections kept for one agent, each with when it was kept, the most
/// recently used last.
type Kept = Vec<(Instant, Box<dyn Conn>)>;

/// Idle connections by agent address.
#[derive(Default)]
struct Idle {
    by_address: HashMap<String, Kept>,
    swept: Option<Instant>,
}

static IDLE: LazyLock<Mutex<Idle>> = LazyLock::new(Mutex::default);

fn idle() -> std::sync::MutexGuard<'static, Idle> {
    IDLE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Idle {
    /// A kept connection to `address` that is not too old, if any.
    fn take(&mut self, address: &str) -> Option<Box<dyn Conn>> {
        let kept = self.by_address.get_mut(address)?;
        let fresh = loop {
            match kept.pop() {
                Some((at, conn)) if at.elapsed() < KEPT_FOR => break Some(conn),
                Some(_) => {}
                None => break None,
            }
        };
        if kept.is_empty() {
            self.by_address.remove(address);
        }
        fresh
    }

    /// Keeps `conn` for the next exchange with `address`; now and then
    /// drops what was kept too long, for agents no longer used.
    fn keep(&mut self, address: &str, conn: Box<dyn Conn>) {
        let now = Instant::now();
        if self.swept.is_none_or(|at| now - at >= KEPT_FOR) {
            self.by_address.retain(|_, kept| {
                kept.retain(|(at, _)| now - *at < KEPT_FOR);
                !kept.is_empty()
            });
            self.swept = Some(now);
        }
        let kept = self.by_address.entry(address.to_owned()).or_default();
        if kept.len() == KEPT_PER_AGENT {
            kept.remove(0);
        }
        kept.push((now, conn));
    }
}

/// Drops the connections kept for `address` (its pod is gone).
pub fn forget(address: &str) {
    idle().by_address.remove(address);
}

/// How many idle connections are kept for `address` (for operators'
/// diagnostics and tests).
pub fn kept(address: &str) -> usize {
    idle().by_address.get(address).map_or(0, Vec::len)
}

/// Connects to an agent address: `unix:/path/to.sock` or `tcp:host:port`.
async fn connect(address: &str) -> Result<Box<dyn Conn>, Error> {
    let err = |e: std::io::Error| agent_error(address, e);
    if let Some(path) = address.strip_prefix("unix:") {
        Ok(Box::new(
            tokio::net::UnixStream::connect(path).await.map_err(err)?,
        ))
    } else if let Some(hostport) = address.strip_prefix("tcp:") {
        let stream = tokio::net::TcpStream::connect(hostport)
            .await
            .map_err(err)?;
        stream.set_nodelay(true).map_err(err)?;
        Ok(Box::new(stream))
    } else {
        Err(Error::Protocol(format!(
            "unsupported agent address `{address}`"
        )))
    }
}

fn agent_error(address: &str, e: impl ToString) -> Error {
    Error::Agent {
        address: address.to_owned(),
        message: e.to_string(),
    }
}

/// One open exchange with an agent.
pub struct Exchange {
    address: String,
    /// `None` only while being taken apart on drop.
    lines: Option<Reader>,
    writer: Option<Writer>,
    /// The request, kept until the first frame: if the connection was a kept
    /// one the agent had closed, it is sent again on a new one.
    retry: Option<Vec<u8>>,
    /// The final frame was read and nothing else was sent: the connection
    /// may serve the next exchange.
    reusable: bool,
    /// Whether the connection may be kept at all (an attach's is not: the
    /// agent hands it to the run, and closes it when it ends).
    keep: bool,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("address", &self.address)
            .finish()
    }
}

impl Exchange {
    /// Opens an exchange, on a kept connection if there is one, and sends
    /// `request` with the sender's leadership `epoch` and the pod's `token`
    /// (see [`Envelope`]).
    pub async fn open(
        address: &str,
        token: Option<&str>,
        epoch: u64,
        request: Request,
    ) -> Result<Self, Error> {
        let keep = !matches!(request, Request::Attach { .. });
        let envelope = Envelope {
            epoch,
            token: token.map(str::to_owned),
            request,
        };
        let mut line = serde_json::to_vec(&envelope).map_err(|e| Error::Protocol(e.to_string()))?;
        line.push(b'\n');
        let kept = if keep { idle().take(address) } else { None };
        let mut exchange = Exchange {
            address: address.to_owned(),
            lines: None,
            writer: None,
            retry: None,
            reusable: false,
            keep,
        };
        if let Some(conn) = kept {
            exchange.start(conn);
            if exchange.send(&line).await.is_ok() {
                exchange.retry = Some(line);
                return Ok(exchange);
            }
        }
        exchange.start(connect(address).await?);
        exchange.send(&line).await?;
        Ok(exchange)
    }

    fn start(&mut self, conn: Box<dyn Conn>) {
        let (read, write) = tokio::io::split(conn);
        self.lines = Some(BufReader::new(read).lines());
        self.writer = Some(write);
    }

    async fn send(&mut self, line: &[u8]) -> Result<(), Error> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        let sent = match w.write_all(line).await {
            Ok(()) => w.flush().await,
            Err(e) => Err(e),
        };
        sent.map_err(|e| agent_error(&self.address, e))
    }

    /// The next frame. A connection closed before a final frame is an
    /// error.
    pub async fn next(&mut self) -> Result<Frame, Error> {
        loop {
            let read = match self.lines.as_mut() {
                Some(lines) => lines.next_line().await,
                None => Ok(None),
            };
            let line = match read {
                Ok(Some(line)) => line,
                // A kept connection the agent closed before answering: the
                // request again, on a new one.
                Ok(None) | Err(_) if self.retry.is_some() => {
                    let line = self.retry.take().unwrap_or_default();
                    self.start(connect(&self.address).await?);
                    self.send(&line).await?;
                    continue;
                }
                Ok(None) => {
                    return Err(agent_error(
                        &self.address,
                        "connection closed before the exchange ended",
                    ));
                }
                Err(e) => return Err(agent_error(&self.address, e)),
            };
            self.retry = None;
            let frame: Frame = serde_json::from_str(&line)
                .map_err(|e| Error::Protocol(format!("bad frame from agent: {e}")))?;
            // The agent closes a connection after a request it refused.
            self.reusable = self.keep && frame.is_final() && !matches!(frame, Frame::Error { .. });
            return Ok(frame);
        }
    }

    /// Asks the agent to cancel the running job. The agent then kills the
    /// job's process tree and answers with a final `exit` frame.
    pub async fn cancel(&mut self) -> Result<(), Error> {
        // A cancel that crosses the final frame would reach the agent as
        // the next request: the connection is not kept.
        self.keep = false;
        self.send(b"{\"op\":\"cancel\"}\n").await
    }

    /// Reads frames until the final one.
    pub async fn finish(mut self) -> Result<Frame, Error> {
        loop {
            let frame = self.next().await?;
            if frame.is_final() {
                return Ok(frame);
            }
        }
    }
}

impl Drop for Exchange {
    /// Keeps the connection for the next exchange if this one ended cleanly.
    fn drop(&mut self) {
        if !self.reusable {
            return;
        }
        let (Some(lines), Some(writer)) = (self.lines.take(), self.writer.take()) else {
            return;
        };
        let reader = lines.into_inner();
        // Anything after the final frame is not the next exchange's.
        if reader.buffer().is_empty() {
            idle().keep(&self.address, reader.into_inner().unsplit(writer));
        }
    }
}

/// Pings an agent; returns its `pong`.
pub async fn ping(address: &str, token: Option<&str>, epoch: u64) -> Result<Frame, Error> {
    Exchange::open(address, token, epoch, Request::Ping)
        .await?
        .finish()
        .await
}

/// Starts a run; read its frames from the returned exchange.
pub async fn run(
    address: &str,
    token: Option<&str>,
    epoch: u64,
    run: Run,
) -> Result<Exchange, Error> {
    Exchange::open(address, token, epoch, Request::Run(Box::new(run))).await
}

/// Takes over the stream of run `job_id` (a new leader): every frame of
/// the run from its start, then the rest live; read them from the returned
/// exchange. An agent running no such job answers with an error frame.
pub async fn attach(
    address: &str,
    token: Option<&str>,
    epoch: u64,
    job_id: &str,
) -> Result<Exchange, Error> {
    let request = Request::Attach {
        job_id: job_id.to_owned(),
    };
    Exchange::open(address, token, epoch, request).await
}

/// Wipes the pod clean.
pub async fn wipe(address: &str, token: Option<&str>, epoch: u64) -> Result<(), Error> {
    match Exchange::open(address, token, epoch, Request::Wipe)
        .await?
        .finish()
        .await?
    {
        Frame::Wiped => Ok(()),
        other => Err(refused("wiped", other, address)),
    }
}

/// Asks what the pod holds.
pub async fn status(
    address: &str,
    token: Option<&str>,
    epoch: u64,
) -> Result<crate::Holding, Error> {
    match Exchange::open(address, token, epoch, Request::Status)
        .await?
        .finish()
        .await?
    {
        Frame::Status {
            busy,
            job_id,
            caller,
            envs,
        } => Ok(crate::Holding {
            busy,
            job_id,
            caller,
            envs,
        }),
        other => Err(refused("status", other, address)),
    }
}

/// An answer other than the one expected: the agent's own error, or a
/// protocol mismatch.
fn refused(expected: &str, got: Frame, address: &str) -> Error {
    match got {
        Frame::Error { message, .. } => Error::Agent {
            address: address.to_owned(),
            message,
        },
        other => Error::Protocol(format!("expected `{expected}`, got {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::UnixListener;

    use super::*;

    /// A fake agent on a socket of its own: it answers every request line
    /// with a pong, at most `per_conn` on a connection (it closes the
    /// connection on the next request, unanswered), and counts the
    /// connections it accepted. A `run` is answered with
    /// `bound`, then an `exit` once a further line (a cancel) arrives.
    struct Fake {
        address: String,
        accepted: Arc<AtomicUsize>,
        _dir: tempdir::Dir,
    }

    mod tempdir {
        /// A directory removed on drop.
        pub struct Dir(pub std::path::PathBuf);
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    async fn fake(per_conn: usize) -> Fake {
        let dir = std::env::temp_dir().join(format!(
            "hearth-client-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("agent.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let (read, mut write) = tokio::io::split(conn);
                    let mut lines = BufReader::new(read).lines();
                    for _ in 0..per_conn {
                        let Ok(Some(line)) = lines.next_line().await else {
                            return;
                        };
                        let answer = if line.contains("\"run\"") {
                            let bound = Frame::Bound {
                                bind_ms: 1.0,
                                deps_cached: false,
                            };
                            let bound = serde_json::to_string(&bound).unwrap();
                            write
                                .write_all(format!("{bound}\n").as_bytes())
                                .await
                                .unwrap();
                            let _cancel = lines.next_line().await;
                            Frame::Exit {
                                outcome: hearth_core::agent::Outcome::Cancelled,
                                exit_code: None,
                                output: None,
                                output_error: None,
                                run_ms: 1.0,
                            }
                        } else {
                            Frame::Pong {
                                protocol: 3,
                                sandbox: "none".into(),
                            }
                        };
                        let answer = serde_json::to_string(&answer).unwrap();
                        write
                            .write_all(format!("{answer}\n").as_bytes())
                            .await
                            .unwrap();
                    }
                    // The next request is read and left unanswered.
                    let _ = lines.next_line().await;
                });
            }
        });
        Fake {
            address: format!("unix:{}", socket.display()),
            accepted,
            _dir: tempdir::Dir(dir),
        }
    }

    static NEXT: AtomicUsize = AtomicUsize::new(0);

    async fn pong(address: &str) {
        assert!(matches!(
            ping(address, None, 0).await.unwrap(),
            Frame::Pong { .. }
        ));
    }

    #[tokio::test]
    async fn exchanges_with_one_agent_share_a_connection() {
        let agent = fake(usize::MAX).await;
        for _ in 0..3 {
            pong(&agent.address).await;
        }
        assert_eq!(agent.accepted.load(Ordering::SeqCst), 1);
        forget(&agent.address);
        pong(&agent.address).await;
        assert_eq!(agent.accepted.load(Ordering::SeqCst), 2, "forgotten");
    }

    #[tokio::test]
    async fn a_kept_connection_the_agent_closed_is_replaced() {
        let agent = fake(1).await;
        for _ in 0..3 {
            pong(&agent.address).await;
        }
        assert_eq!(agent.accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_cancelled_exchange_does_not_keep_its_connection() {
        let agent = fake(usize::MAX).await;
        let mut ex = Exchange::open(&agent.address, None, 0, Request::Ping)
            .await
            .unwrap();
        assert!(matches!(ex.next().await.unwrap(), Frame::Pong { .. }));
        drop(ex);
        let run: Run = serde_json::from_value(serde_json::json!({
            "job_id": "j", "files": {}, "command": ["true"], "timeout_ms": 1000,
            "max_log_bytes": 10
        }))
        .unwrap();
        let mut ex = super::run(&agent.address, None, 0, run).await.unwrap();
        assert!(matches!(ex.next().await.unwrap(), Frame::Bound { .. }));
        ex.cancel().await.unwrap();
        assert!(matches!(ex.finish().await.unwrap(), Frame::Exit { .. }));
        // The ping and the run shared one connection; the run's is not kept.
        pong(&agent.address).await;
        assert_eq!(agent.accepted.load(Ordering::SeqCst), 2);
    }
}
