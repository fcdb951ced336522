//! Client side of the agent protocol ([`hearth_core::agent`]): one connection
//! per exchange, JSON lines both ways.

use hearth_core::agent::{Envelope, Frame, Request, Run};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};

use crate::Error;

trait Conn: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Conn for T {}

type Reader = Lines<BufReader<tokio::io::ReadHalf<Box<dyn Conn>>>>;
type Writer = tokio::io::WriteHalf<Box<dyn Conn>>;

/// Connects to an agent address: `unix:/path/to.sock` or `tcp:host:port`.
async fn connect(address: &str) -> Result<Box<dyn Conn>, Error> {
    let err = |e: std::io::Error| Error::Agent {
        address: address.to_owned(),
        message: e.to_string(),
    };
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

/// One open exchange with an agent.
pub struct Exchange {
    address: String,
    lines: Reader,
    writer: Option<Writer>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("address", &self.address)
            .finish()
    }
}

impl Exchange {
    /// Opens a connection and sends `request` with the sender's leadership
    /// `epoch` and the pod's `token` (see [`Envelope`]).
    pub async fn open(
        address: &str,
        token: Option<&str>,
        epoch: u64,
        request: Request,
    ) -> Result<Self, Error> {
        let conn = connect(address).await?;
        let (read, mut write) = tokio::io::split(conn);
        let envelope = Envelope {
            epoch,
            token: token.map(str::to_owned),
            request,
        };
        let mut line = serde_json::to_vec(&envelope).map_err(|e| Error::Protocol(e.to_string()))?;
        line.push(b'\n');
        write.write_all(&line).await.map_err(|e| Error::Agent {
            address: address.to_owned(),
            message: e.to_string(),
        })?;
        write.flush().await?;
        Ok(Exchange {
            address: address.to_owned(),
            lines: BufReader::new(read).lines(),
            writer: Some(write),
        })
    }

    /// The next frame, or `None` when the agent closed the connection after a
    /// final frame. A connection closed before a final frame is an error.
    pub async fn next(&mut self) -> Result<Frame, Error> {
        match self.lines.next_line().await {
            Ok(Some(line)) => serde_json::from_str(&line)
                .map_err(|e| Error::Protocol(format!("bad frame from agent: {e}"))),
            Ok(None) => Err(Error::Agent {
                address: self.address.clone(),
                message: "connection closed before the exchange ended".to_owned(),
            }),
            Err(e) => Err(Error::Agent {
                address: self.address.clone(),
                message: e.to_string(),
            }),
        }
    }

    /// Asks the agent to cancel the running job. The agent then kills the
    /// job's process tree and answers with a final `exit` frame.
    pub async fn cancel(&mut self) -> Result<(), Error> {
        if let Some(w) = self.writer.as_mut() {
            w.write_all(b"{\"op\":\"cancel\"}\n").await?;
            w.flush().await?;
        }
        Ok(())
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
