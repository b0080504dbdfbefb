//! A minimal HTTP/1.1 client for tests of admin endpoints over real TCP on loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An HTTP response as a test sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The header fields, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body (Content-Length bytes), as text.
    pub body: String,
}

impl Response {
    /// The first value of header `name` (lower case), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one HTTP/1.1 request (`Connection: close`) and returns the status and the body.
/// Bounded by a 5 s read timeout.
///
/// # Panics
/// On any I/O error or a response that is not HTTP/1.1 with a status and Content-Length:
/// it is for tests.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let r = request_with(addr, method, path, &[], body);
    (r.status, r.body)
}

/// [`request`] with extra header fields (`("Authorization", "Bearer …")`), returning the
/// response's headers too.
///
/// # Panics
/// As [`request`].
pub fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    read_response(stream)
}

/// Reads one response (status line, headers, Content-Length body) from `stream`.
///
/// # Panics
/// As [`request`].
pub fn read_response(stream: impl Read) -> Response {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut length = 0;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.to_ascii_lowercase(), value.trim().to_string());
            if name == "content-length" {
                length = value.parse().unwrap();
            }
            headers.push((name, value));
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Response {
        status,
        headers,
        body: String::from_utf8(body).unwrap(),
    }
}
