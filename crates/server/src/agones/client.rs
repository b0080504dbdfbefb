//! A blocking HTTP/1.1 client for the Agones SDK sidecar's REST gateway, and nothing else:
//! one request per connection (`Connection: close`) to a loopback port, every read and
//! write under a timeout, bodies capped. No async runtime and no dependency: the sidecar
//! speaks plain HTTP on localhost, so a general client (TLS, pools, proxies) buys nothing.
//!
//! What the sidecar sends back is untrusted input like any other: a bad status line, an
//! oversized body or a broken chunk is an error, never a panic.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

/// Largest response body (or watch line) read: a GameServer is a few KiB.
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;

/// Largest response head read.
const MAX_HEAD_BYTES: u64 = 64 * 1024;

/// Why a call failed. Every one is retried by the caller.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No connection: the sidecar is not listening (yet).
    #[error("connecting to the SDK sidecar at {addr}: {source}")]
    Connect {
        /// The sidecar's address.
        addr: SocketAddr,
        /// What the OS said.
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
        /// Its body, cut to 200 bytes.
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
    /// Bounds the connect and each read and write of a call.
    pub timeout: Duration,
}

impl Sidecar {
    /// One call: `method path` with a JSON `body`; returns the 2xx answer's body.
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
        let stream = self.send(method, path, body, timeout)?;
        let mut reader = BufReader::new(stream);
        let head = read_head(&mut reader)?;
        let bytes = match (head.chunked, head.length) {
            (true, _) => read_all(Chunked::new(reader))?,
            (false, Some(n)) if n > MAX_BODY_BYTES => {
                return Err(CallError::Malformed(format!("a body of {n} bytes")))
            }
            (false, Some(n)) => {
                let mut body = vec![0; n as usize];
                reader.read_exact(&mut body)?;
                body
            }
            (false, None) => read_all(reader)?,
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| CallError::Malformed("a body that is not UTF-8".to_string()))?;
        if !(200..300).contains(&head.status) {
            return Err(CallError::Status {
                status: head.status,
                body: text.chars().take(200).collect(),
            });
        }
        Ok(text)
    }

    /// Opens `GET /watch/gameserver`: once the sidecar has answered 200, the stream yields
    /// one JSON line per GameServer update. Reads on it wait indefinitely (an update may be
    /// hours away); [`WatchStream::closer`] ends them from another thread.
    pub fn watch(&self, path: &str) -> Result<WatchStream, CallError> {
        let stream = self.send("GET", path, "", self.timeout)?;
        let closer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let head = read_head(&mut reader)?;
        if head.status != 200 {
            return Err(CallError::Status {
                status: head.status,
                body: String::new(),
            });
        }
        reader.get_ref().set_read_timeout(None)?;
        let body: Box<dyn BufRead + Send> = if head.chunked {
            Box::new(BufReader::new(Chunked::new(reader)))
        } else {
            Box::new(reader)
        };
        Ok(WatchStream { body, closer })
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        body: &str,
        timeout: Duration,
    ) -> Result<TcpStream, CallError> {
        let timeout = timeout.max(Duration::from_millis(1));
        let mut stream = TcpStream::connect_timeout(&self.addr, timeout).map_err(|source| {
            CallError::Connect {
                addr: self.addr,
                source,
            }
        })?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes())?;
        Ok(stream)
    }
}

/// An open watch: GameServer updates as JSON lines.
pub struct WatchStream {
    body: Box<dyn BufRead + Send>,
    closer: TcpStream,
}

impl WatchStream {
    /// The next line, without its newline; `Ok(None)` when the sidecar closed the stream.
    /// A line over [`MAX_BODY_BYTES`] is an error.
    pub fn next_line(&mut self) -> Result<Option<String>, CallError> {
        let mut line = Vec::new();
        let n = (&mut self.body)
            .take(MAX_BODY_BYTES + 1)
            .read_until(b'\n', &mut line)?;
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
    pub fn closer(&self) -> io::Result<StreamCloser> {
        Ok(StreamCloser(self.closer.try_clone()?))
    }
}

/// Ends a [`WatchStream`] from another thread.
#[derive(Debug)]
pub struct StreamCloser(TcpStream);

impl StreamCloser {
    /// Shuts the connection down; the stream's reader sees its end.
    pub fn close(&self) {
        let _ = self.0.shutdown(Shutdown::Both);
    }
}

/// What matters of a response's head.
struct Head {
    status: u16,
    length: Option<u64>,
    chunked: bool,
}

fn read_head(reader: &mut impl BufRead) -> Result<Head, CallError> {
    let mut limited = reader.take(MAX_HEAD_BYTES);
    let mut line = String::new();
    limited.read_line(&mut line)?;
    let mut parts = line.split_ascii_whitespace();
    let status = match (parts.next(), parts.next()) {
        (Some(version), Some(code)) if version.starts_with("HTTP/1.") => code.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| CallError::Malformed(format!("status line {:?}", line.trim_end())))?;
    let (mut length, mut chunked) = (None, false);
    loop {
        line.clear();
        if limited.read_line(&mut line)? == 0 {
            return Err(CallError::Malformed("the head ended early".to_string()));
        }
        let field = line.trim_end();
        if field.is_empty() {
            break;
        }
        let Some((name, value)) = field.split_once(':') else {
            return Err(CallError::Malformed(format!("header {field:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse()
                .map_err(|_| CallError::Malformed(format!("Content-Length {value:?}")))?;
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    Ok(Head {
        status,
        length,
        chunked,
    })
}

fn read_all(reader: impl Read) -> Result<Vec<u8>, CallError> {
    let mut body = Vec::new();
    reader.take(MAX_BODY_BYTES + 1).read_to_end(&mut body)?;
    if body.len() as u64 > MAX_BODY_BYTES {
        return Err(CallError::Malformed("a body over 1 MiB".to_string()));
    }
    Ok(body)
}

/// Reads a chunked body (RFC 9112 §7.1) as plain bytes; trailers are skipped.
struct Chunked<R> {
    inner: R,
    /// Bytes left in the current chunk; `None`: at a chunk-size line.
    left: Option<u64>,
    done: bool,
}

impl<R: BufRead> Chunked<R> {
    fn new(inner: R) -> Chunked<R> {
        Chunked {
            inner,
            left: None,
            done: false,
        }
    }

    fn size_line(&mut self) -> io::Result<u64> {
        let mut line = String::new();
        (&mut self.inner).take(1024).read_line(&mut line)?;
        if line.is_empty() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let size = line.trim_end().split(';').next().unwrap_or("").trim();
        u64::from_str_radix(size, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a bad chunk size"))
    }
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        let left = match self.left {
            Some(n) => n,
            None => {
                let n = self.size_line()?;
                if n == 0 {
                    self.done = true;
                    return Ok(0);
                }
                n
            }
        };
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let got = self.inner.read(&mut buf[..want])?;
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let left = left - got as u64;
        if left == 0 {
            // The CRLF that closes the chunk.
            let mut crlf = String::new();
            (&mut self.inner).take(2).read_line(&mut crlf)?;
            self.left = None;
        } else {
            self.left = Some(left);
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_reads_whole_and_a_bad_one_is_an_error() {
        let body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        let text = read_all(Chunked::new(&body[..])).unwrap();
        assert_eq!(text, b"hello, world");
        let bad = b"zz\r\nhello\r\n";
        assert!(read_all(Chunked::new(&bad[..])).is_err());
        let short = b"10\r\nhello";
        assert!(read_all(Chunked::new(&short[..])).is_err());
    }

    #[test]
    fn a_head_that_is_not_http_is_malformed_not_a_panic() {
        for head in [
            &b""[..],
            b"garbage\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n",
        ] {
            assert!(read_head(&mut &head[..]).is_err(), "{head:?}");
        }
        let head = read_head(&mut &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"[..]).unwrap();
        assert_eq!(
            (head.status, head.length, head.chunked),
            (200, Some(2), false)
        );
    }

    proptest::proptest! {
        /// Whatever bytes the sidecar sends, reading a head and a chunked body ends in a
        /// value or an error, never a panic, and no body over the cap is returned.
        #[test]
        fn any_bytes_from_the_sidecar_read_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let mut reader = &bytes[..];
            let _ = read_head(&mut reader);
            if let Ok(body) = read_all(Chunked::new(&bytes[..])) {
                proptest::prop_assert!(body.len() as u64 <= MAX_BODY_BYTES);
            }
        }
    }
}
