//! The HTTP/1.1 framing the JSON stand-ins share: read one request (Content-Length bodies),
//! write one JSON response. Keep-alive: a connection serves requests until the client closes it.

use std::io::{BufRead, Write};

/// One request as received.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target, query included.
    pub path: String,
    /// The headers as sent.
    pub headers: Vec<(String, String)>,
    /// The body as text.
    pub body: String,
}

impl SeenRequest {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the next request; `None` when the client closed the connection or sent garbage.
pub(crate) fn read_request(reader: &mut impl BufRead) -> Option<SeenRequest> {
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return None;
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(SeenRequest {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// The status line text of the codes the stand-ins answer with.
pub(crate) fn status_line(code: u16) -> &'static str {
    match code {
        200 => "200 OK",
        201 => "201 Created",
        400 => "400 Bad Request",
        401 => "401 Unauthorized",
        403 => "403 Forbidden",
        404 => "404 Not Found",
        422 => "422 Unprocessable Entity",
        429 => "429 Too Many Requests",
        _ => "500 Internal Server Error",
    }
}

/// Writes one JSON response; false when the client has gone.
pub(crate) fn write_json(writer: &mut impl Write, code: u16, body: &str) -> bool {
    let resp = format!(
        "HTTP/1.1 {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        status_line(code),
        body.len()
    );
    writer.write_all(resp.as_bytes()).is_ok()
}
