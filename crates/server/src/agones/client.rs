//! The Agones SDK sidecar's REST gateway, spoken with [`ureq`] (blocking, no TLS: the
//! sidecar is plain HTTP on loopback): one connection per call, every call under a
//! timeout, bodies capped.
//!
//! What the sidecar sends back is untrusted input like any other: ureq parses it, and a
//! bad status line, an oversized body or a broken chunk is an error, never a panic.

use std::io::{self, BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::time::Duration;

use ureq::config::{Config, ConfigBuilder};
use ureq::http::{header, Request, Uri};
use ureq::typestate::AgentScope;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{NextTimeout, TcpConnector};
use ureq::{Agent, BodyReader, Timeout};

/// Largest response body (or watch line) read: a GameServer is a few KiB.
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;

/// How long a watch waits for its answer's head (see [`Sidecar::watch`]).
const WATCH_HEAD_WAIT: Duration = Duration::from_secs(60);

/// Largest response head read.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Why a call failed. Every one is retried by the caller.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No connection: the sidecar is not listening (yet).
    #[error("connecting to the SDK sidecar at {addr}: {source}")]
    Connect {
        /// The sidecar's address.
        addr: SocketAddr,
        /// What the OS (or the connect timeout) said.
        source: io::Error,
    },
    /// The connection broke or timed out mid-call.
    #[error("talking to the SDK sidecar: {0}")]
    Io(#[from] io::Error),
    /// The sidecar answered, with an error status.
    #[error("the SDK sidecar answered {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// Its body, cut to 200 characters.
        body: String,
    },
    /// The answer was not HTTP/1.x, or its body not what the call expects.
    #[error("the SDK sidecar's answer is malformed: {0}")]
    Malformed(String),
}

/// The sidecar's REST gateway at `addr`, every call bounded by `timeout`.
#[derive(Clone, Copy, Debug)]
pub struct Sidecar {
    /// `127.0.0.1:AGONES_SDK_HTTP_PORT`.
    pub addr: SocketAddr,
    /// Bounds a whole call, from connecting to the last byte of the answer; for the
    /// watch stream, each step up to the answer's head.
    pub timeout: Duration,
}

impl Sidecar {
    /// One call: `method path` with a JSON `body` (none when empty); returns the 2xx
    /// answer's body.
    pub fn call(&self, method: &str, path: &str, body: &str) -> Result<String, CallError> {
        self.call_within(method, path, body, self.timeout)
    }

    /// [`Sidecar::call`] bounded by `timeout` instead of the sidecar's own.
    pub fn call_within(
        &self,
        method: &str,
        path: &str,
        body: &str,
        timeout: Duration,
    ) -> Result<String, CallError> {
        // One budget, from connecting to the end of the body.
        let agent = self.agent(Agent::config_builder().timeout_global(Some(bounded(timeout))));
        let mut response = self.send(&agent, method, path, body)?;
        let bytes = (response.body_mut().with_config())
            .limit(MAX_BODY_BYTES)
            .read_to_vec()
            .map_err(|e| error(self.addr, e))?;
        let status = response.status().as_u16();
        if !response.status().is_success() {
            return Err(CallError::Status {
                status,
                body: String::from_utf8_lossy(&bytes).chars().take(200).collect(),
            });
        }
        String::from_utf8(bytes)
            .map_err(|_| CallError::Malformed("a body that is not UTF-8".to_string()))
    }

    /// Opens `GET /watch/gameserver`: once the sidecar has answered 200, the stream yields
    /// one JSON line per GameServer update. Connecting and sending are each bounded by the
    /// timeout, the answer's head by at least a minute; reads of the body then wait
    /// indefinitely (an update may be hours away), and [`WatchStream::closer`] ends them
    /// from another thread.
    pub fn watch(&self, path: &str) -> Result<WatchStream, CallError> {
        // The REST gateway (grpc-gateway) writes the answer's head with the stream's first
        // message. Agones' SDK server sends the current GameServer at once on a watch, but
        // older ones sent nothing until the next change: the head is waited for long.
        self.watch_within(path, self.timeout.max(WATCH_HEAD_WAIT))
    }

    /// [`Sidecar::watch`] waiting at most `head` for the answer's head.
    fn watch_within(&self, path: &str, head: Duration) -> Result<WatchStream, CallError> {
        let timeout = Some(bounded(self.timeout));
        let head = Some(bounded(head));
        let agent = self.agent(
            Agent::config_builder()
                .timeout_connect(timeout)
                .timeout_send_request(timeout)
                .timeout_recv_response(head),
        );
        let response = self.send(&agent, "GET", path, "")?;
        if response.status() != 200 {
            // The body is not read: no timeout bounds it.
            return Err(CallError::Status {
                status: response.status().as_u16(),
                body: String::new(),
            });
        }
        // No limit on the stream as a whole: `next_line` caps each line.
        let body = response.into_body().into_with_config().reader();
        Ok(WatchStream {
            addr: self.addr,
            body: BufReader::new(body),
            agent,
        })
    }

    /// An agent of its own for one call: nothing is shared between calls, and
    /// [`Agent::shutdown`] (a [`StreamCloser`]) ends only its own.
    fn agent(&self, config: ConfigBuilder<AgentScope>) -> Agent {
        let config = config
            // A status is an answer, mapped to `CallError::Status` here.
            .http_status_as_error(false)
            // Straight to the sidecar, whatever HTTP_PROXY says; it never redirects.
            .proxy(None)
            .max_redirects(0)
            .max_response_header_size(MAX_HEAD_BYTES)
            .build();
        Agent::with_parts(config, TcpConnector::default(), Fixed(self.addr))
    }

    fn send(
        &self,
        agent: &Agent,
        method: &str,
        path: &str,
        body: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, CallError> {
        let request = Request::builder()
            .method(method)
            .uri(format!("http://{}{path}", self.addr));
        let sent = if body.is_empty() {
            request.body(()).map(|r| agent.run(r))
        } else {
            (request.header(header::CONTENT_TYPE, "application/json"))
                .body(body)
                .map(|r| agent.run(r))
        };
        sent.map_err(|e| CallError::Malformed(format!("the request: {e}")))?
            .map_err(|e| error(self.addr, e))
    }
}

/// Sorts a ureq error: no connection, a broken or slow one, or an answer not understood.
fn error(addr: SocketAddr, e: ureq::Error) -> CallError {
    let connect = |source| CallError::Connect { addr, source };
    match e {
        ureq::Error::Io(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::AddrNotAvailable
                    | io::ErrorKind::NetworkUnreachable
                    | io::ErrorKind::HostUnreachable
                    | io::ErrorKind::NetworkDown
            ) =>
        {
            connect(e)
        }
        ureq::Error::ConnectionFailed => connect(io::Error::other(e)),
        ureq::Error::Timeout(Timeout::Connect | Timeout::Resolve) => {
            connect(io::Error::new(io::ErrorKind::TimedOut, e))
        }
        ureq::Error::Io(e) => CallError::Io(e),
        ureq::Error::Timeout(_) => CallError::Io(io::Error::new(io::ErrorKind::TimedOut, e)),
        ureq::Error::BodyExceedsLimit(_) => CallError::Malformed("a body over 1 MiB".to_string()),
        e => CallError::Malformed(e.to_string()),
    }
}

/// A timeout of at least 1 ms: a zero one would fail the call before it starts.
fn bounded(timeout: Duration) -> Duration {
    timeout.max(Duration::from_millis(1))
}

/// Resolves every URL to the sidecar's address: no name lookup (which, under a timeout,
/// ureq's default resolver runs on a thread of its own per call).
#[derive(Debug)]
struct Fixed(SocketAddr);

impl Resolver for Fixed {
    fn resolve(
        &self,
        _: &Uri,
        _: &Config,
        _: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut addrs = self.empty();
        addrs.push(self.0);
        Ok(addrs)
    }
}

/// An open watch: GameServer updates as JSON lines.
pub struct WatchStream {
    addr: SocketAddr,
    body: BufReader<BodyReader<'static>>,
    agent: Agent,
}

impl WatchStream {
    /// The next line, without its newline; `Ok(None)` when the sidecar closed the stream.
    /// A line over [`MAX_BODY_BYTES`] is an error.
    pub fn next_line(&mut self) -> Result<Option<String>, CallError> {
        let mut line = Vec::new();
        let n = (&mut self.body)
            .take(MAX_BODY_BYTES + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| error(self.addr, e.into()))?;
        if n == 0 {
            return Ok(None);
        }
        if line.len() as u64 > MAX_BODY_BYTES {
            return Err(CallError::Malformed("a watch line over 1 MiB".to_string()));
        }
        while line.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
            line.pop();
        }
        String::from_utf8(line)
            .map(Some)
            .map_err(|_| CallError::Malformed("a watch line that is not UTF-8".to_string()))
    }

    /// A handle that ends the stream from another thread: a blocked
    /// [`WatchStream::next_line`] then returns.
    pub fn closer(&self) -> StreamCloser {
        StreamCloser(self.agent.clone())
    }
}

/// Ends a [`WatchStream`] from another thread.
#[derive(Debug)]
pub struct StreamCloser(Agent);

impl StreamCloser {
    /// Shuts the stream's connection down ([`Agent::shutdown`]); its reader sees an error.
    pub fn close(&self) {
        self.0.clone().shutdown();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{Shutdown, TcpListener};
    use std::sync::mpsc;
    use std::time::Instant;

    use super::*;

    /// What the test sidecar does once it has read the request.
    enum Then {
        /// Writes the answer and closes its side.
        Close,
        /// Writes the answer and holds the connection open.
        Hold,
    }

    /// A sidecar on a loopback port that answers one connection with `answer` (empty:
    /// says nothing), then keeps it until the client goes.
    fn serve(answer: impl Into<Vec<u8>>, then: Then) -> Sidecar {
        let answer = answer.into();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(&stream);
            let mut length = 0;
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = n.trim().parse().unwrap();
                }
                line.clear();
            }
            let _ = reader.read_exact(&mut vec![0; length]);
            let _ = (&stream).write_all(&answer);
            if let Then::Close = then {
                let _ = stream.shutdown(Shutdown::Write);
            }
            // Until the client closes.
            let _ = io::copy(&mut &stream, &mut io::sink());
        });
        Sidecar {
            addr,
            timeout: Duration::from_secs(5),
        }
    }

    fn ok(body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn a_2xx_answer_is_its_body_and_an_error_status_keeps_200_characters_of_its() {
        let sidecar = serve(ok("{\"a\":1}"), Then::Hold);
        assert_eq!(sidecar.call("POST", "/ready", "{}").unwrap(), "{\"a\":1}");
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                       3\r\n{\"b\r\n3;x=y\r\n\":2\r\n1\r\n}\r\n0\r\n\r\n";
        let sidecar = serve(chunked, Then::Hold);
        assert_eq!(sidecar.call("GET", "/gameserver", "").unwrap(), "{\"b\":2}");
        let long = "é".repeat(300);
        let answer = format!(
            "HTTP/1.1 503 Unavailable\r\nContent-Length: {}\r\n\r\n{long}",
            long.len()
        );
        match serve(answer, Then::Hold).call("POST", "/health", "{}") {
            Err(CallError::Status { status, body }) => {
                assert_eq!(status, 503);
                assert_eq!(body, "é".repeat(200));
            }
            other => panic!("{other:?}"),
        }
        // A redirect is not followed: it is a status like any other.
        let answer = "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n";
        let result = serve(answer, Then::Hold).call("GET", "/gameserver", "");
        assert!(
            matches!(result, Err(CallError::Status { status: 302, .. })),
            "{result:?}"
        );
    }

    #[test]
    fn a_refused_connection_is_a_connect_error() {
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let sidecar = Sidecar {
            addr,
            timeout: Duration::from_secs(5),
        };
        let result = sidecar.call("POST", "/ready", "{}");
        assert!(
            matches!(result, Err(CallError::Connect { .. })),
            "{result:?}"
        );
        let result = sidecar.watch("/watch/gameserver").err();
        assert!(
            matches!(result, Some(CallError::Connect { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn a_call_is_bounded_as_a_whole_by_its_timeout() {
        let bound = Duration::from_millis(300);
        // Silent; then a head, and a body that never comes whole.
        for answer in ["", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"a\""] {
            let sidecar = serve(answer, Then::Hold);
            let start = Instant::now();
            let result = sidecar.call_within("POST", "/ready", "{}", bound);
            let took = start.elapsed();
            assert!(
                matches!(&result, Err(CallError::Io(e)) if e.kind() == io::ErrorKind::TimedOut),
                "{result:?}"
            );
            assert!(took >= bound && took < bound * 4, "{took:?}");
        }
        // The watch's head is bounded too.
        let sidecar = Sidecar {
            timeout: bound,
            ..serve("", Then::Hold)
        };
        let start = Instant::now();
        let result = sidecar.watch_within("/watch/gameserver", bound);
        assert!(
            matches!(result, Err(CallError::Io(_))),
            "{:?}",
            result.err()
        );
        assert!(start.elapsed() < bound * 4, "{:?}", start.elapsed());
    }

    #[test]
    fn a_body_over_1_mib_is_malformed_and_one_at_it_is_read() {
        let at = "x".repeat(MAX_BODY_BYTES as usize);
        let body = serve(ok(&at), Then::Hold).call("GET", "/gameserver", "");
        assert_eq!(body.unwrap().len(), at.len());
        let over = format!("{at}x");
        let result = serve(ok(&over), Then::Hold).call("GET", "/gameserver", "");
        assert!(matches!(result, Err(CallError::Malformed(_))), "{result:?}");
        // Without a length, read until the close: the cap holds too.
        let answer = format!("HTTP/1.1 200 OK\r\n\r\n{over}");
        let result = serve(answer, Then::Close).call("GET", "/gameserver", "");
        assert!(matches!(result, Err(CallError::Malformed(_))), "{result:?}");
    }

    #[test]
    fn an_answer_that_is_not_http_is_an_error_not_a_panic() {
        for answer in [
            &b""[..],
            b"garbage\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n\xff\xfe",
        ] {
            let result = serve(answer, Then::Close).call("GET", "/gameserver", "");
            assert!(result.is_err(), "{answer:?}: {result:?}");
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\nX: {}\r\n\r\n",
            "x".repeat(MAX_HEAD_BYTES)
        );
        let result = serve(head, Then::Close).call("GET", "/gameserver", "");
        assert!(matches!(result, Err(CallError::Malformed(_))), "{result:?}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Whatever bytes the sidecar sends after a valid head or none, a call ends in a
        /// value or an error, never a panic, and no body over the cap is returned.
        #[test]
        fn any_answer_from_the_sidecar_reads_without_panic(
            head in proptest::prop_oneof![
                proptest::strategy::Just(""),
                proptest::strategy::Just("HTTP/1.1 200 OK\r\n"),
                proptest::strategy::Just("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ],
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
        ) {
            let mut answer = head.as_bytes().to_vec();
            answer.extend(bytes);
            let sidecar = serve(answer.clone(), Then::Close);
            if let Ok(body) = sidecar.call("GET", "/gameserver", "") {
                proptest::prop_assert!(body.len() as u64 <= MAX_BODY_BYTES);
            }
            if let Ok(mut stream) = serve(answer, Then::Close).watch("/watch/gameserver") {
                while let Ok(Some(_)) = stream.next_line() {}
            }
        }
    }

    const WATCH_HEAD: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

    #[test]
    fn a_watch_yields_its_lines_and_a_closer_ends_a_blocked_read_from_another_thread() {
        let lines = "{\"a\":1}\r\n\n{\"b\":2}\n";
        let answer = format!("{WATCH_HEAD}{:x}\r\n{lines}\r\n", lines.len());
        let mut stream = serve(answer, Then::Hold)
            .watch("/watch/gameserver")
            .unwrap();
        assert_eq!(stream.next_line().unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(stream.next_line().unwrap().as_deref(), Some(""));
        assert_eq!(stream.next_line().unwrap().as_deref(), Some("{\"b\":2}"));
        // Nothing more comes: the next read blocks until closed.
        let closer = stream.closer();
        let (done, ended) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let _ = done.send(stream.next_line().map(|line| line.is_some()));
        });
        closer.close();
        let ended = ended.recv_timeout(Duration::from_secs(10));
        assert!(
            matches!(ended, Ok(Ok(false) | Err(_))),
            "the read did not end: {ended:?}"
        );
        reader.join().unwrap();
    }

    #[test]
    fn a_watch_line_over_1_mib_or_an_error_status_is_an_error() {
        let long = "x".repeat(MAX_BODY_BYTES as usize + 1);
        let answer = format!("HTTP/1.1 200 OK\r\n\r\n{long}");
        let mut stream = serve(answer, Then::Close)
            .watch("/watch/gameserver")
            .unwrap();
        let result = stream.next_line();
        assert!(matches!(result, Err(CallError::Malformed(_))), "{result:?}");
        let answer = "HTTP/1.1 500 Error\r\nContent-Length: 2\r\n\r\n{}";
        let result = serve(answer, Then::Hold).watch("/watch/gameserver").err();
        assert!(
            matches!(result, Some(CallError::Status { status: 500, .. })),
            "{result:?}"
        );
        // A stream the sidecar ends is the end.
        let mut stream = serve(format!("{WATCH_HEAD}0\r\n\r\n"), Then::Close)
            .watch("/watch/gameserver")
            .unwrap();
        assert!(matches!(stream.next_line(), Ok(None)));
    }
}
