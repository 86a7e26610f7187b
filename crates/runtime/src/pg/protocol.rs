//! Protocol 3.0 framing: reading frames with their length checked before anything is
//! allocated, a cursor over a message body that fails instead of panicking, and encoders for
//! the backend messages.

use engine::{DataType, Value};
use sql::error::sqlstate;
use sql::{OutputColumn, SqlError};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why a connection's handling of a message stopped.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The socket failed or the client went away: close silently.
    Io,
    /// A protocol violation: send a FATAL ErrorResponse, then close.
    Fatal(SqlError),
    /// A statement failed: send an ErrorResponse and go on (after an extended-protocol message,
    /// discard messages until Sync).
    Error(SqlError),
}

impl From<SqlError> for Fail {
    fn from(error: SqlError) -> Fail {
        Fail::Error(error)
    }
}

pub(crate) fn protocol_violation(message: impl Into<String>) -> Fail {
    Fail::Fatal(SqlError::new(sqlstate::PROTOCOL_VIOLATION, message))
}

/// The startup-phase request codes.
pub(crate) const PROTOCOL_3_0: i32 = 196_608;
pub(crate) const SSL_REQUEST: i32 = 80_877_103;
pub(crate) const GSSENC_REQUEST: i32 = 80_877_104;
pub(crate) const CANCEL_REQUEST: i32 = 80_877_102;

/// Reads `length` bytes, growing the buffer only as bytes arrive (a client that announces a
/// large message and sends nothing costs nothing).
async fn read_body<R: AsyncRead + Unpin>(reader: &mut R, length: usize) -> Result<Vec<u8>, Fail> {
    let mut body = Vec::with_capacity(length.min(64 * 1024));
    let wanted = u64::try_from(length).map_err(|_| Fail::Io)?;
    let read = reader
        .take(wanted)
        .read_to_end(&mut body)
        .await
        .map_err(|_| Fail::Io)?;
    if read != length {
        return Err(Fail::Io);
    }
    Ok(body)
}

/// Reads the startup-phase frame (length, then body; no type byte). `Ok(None)` at a clean end
/// of stream.
pub(crate) async fn read_startup<R: AsyncRead + Unpin>(
    reader: &mut R,
    bytes_max: usize,
) -> Result<Option<Vec<u8>>, Fail> {
    let mut header = [0u8; 4];
    if reader.read_exact(&mut header).await.is_err() {
        return Ok(None);
    }
    let length = i32::from_be_bytes(header);
    let Ok(length) = usize::try_from(length) else {
        return Err(protocol_violation("invalid length of startup packet"));
    };
    if !(8..=bytes_max).contains(&length) {
        return Err(protocol_violation("invalid length of startup packet"));
    }
    read_body(reader, length - 4).await.map(Some)
}

/// Reads one regular frame: a type byte and a length (which counts itself). `Ok(None)` at a
/// clean end of stream before a new frame.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    bytes_max: usize,
) -> Result<Option<(u8, Vec<u8>)>, Fail> {
    let mut header = [0u8; 5];
    if reader.read_exact(&mut header).await.is_err() {
        return Ok(None);
    }
    let tag = header[0];
    let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    let length = usize::try_from(length)
        .ok()
        .filter(|length| *length >= 4)
        .ok_or_else(|| protocol_violation(format!("invalid message length {length}")))?;
    if length - 4 > bytes_max {
        return Err(Fail::Fatal(SqlError::new(
            sqlstate::PROTOCOL_VIOLATION,
            format!(
                "message of {} bytes exceeds the limit of {bytes_max} bytes",
                length - 4
            ),
        )));
    }
    let body = read_body(reader, length - 4).await?;
    Ok(Some((tag, body)))
}

/// A cursor over a message body. Every read checks the remaining length.
pub(crate) struct Body<'a> {
    bytes: &'a [u8],
}

fn invalid_format() -> Fail {
    protocol_violation("invalid message format")
}

impl<'a> Body<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Body<'a> {
        Body { bytes }
    }

    pub(crate) fn take(&mut self, count: usize) -> Result<&'a [u8], Fail> {
        if count > self.bytes.len() {
            return Err(invalid_format());
        }
        let (taken, rest) = self.bytes.split_at(count);
        self.bytes = rest;
        Ok(taken)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Fail> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn i16(&mut self) -> Result<i16, Fail> {
        let bytes = self.take(2)?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    }

    /// A count sent as Int16 (PostgreSQL reads it unsigned).
    pub(crate) fn count(&mut self) -> Result<usize, Fail> {
        Ok(usize::from(self.i16()? as u16))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, Fail> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// A NUL-terminated string: a missing NUL is a protocol violation, invalid UTF-8 a
    /// statement error (22021).
    pub(crate) fn cstr(&mut self) -> Result<&'a str, Fail> {
        let Some(end) = self.bytes.iter().position(|byte| *byte == 0) else {
            return Err(invalid_format());
        };
        let text = &self.bytes[..end];
        self.bytes = &self.bytes[end + 1..];
        std::str::from_utf8(text).map_err(|_| {
            Fail::Error(SqlError::new(
                "22021",
                "invalid byte sequence for encoding \"UTF8\"",
            ))
        })
    }

    /// How many bytes are left.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// Fails unless the body was read to its end.
    pub(crate) fn end(&self) -> Result<(), Fail> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(invalid_format())
        }
    }
}

/// Backend messages, appended to a buffer the connection flushes.
#[derive(Default)]
pub(crate) struct Out {
    pub(crate) bytes: Vec<u8>,
}

fn length_i32(length: usize) -> [u8; 4] {
    i32::try_from(length).unwrap_or(i32::MAX).to_be_bytes()
}

impl Out {
    fn begin(&mut self, tag: u8) -> usize {
        self.bytes.push(tag);
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&[0; 4]);
        at
    }

    fn end(&mut self, at: usize) {
        let length = length_i32(self.bytes.len() - at);
        self.bytes[at..at + 4].copy_from_slice(&length);
    }

    fn i16(&mut self, value: i16) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    fn i32(&mut self, value: i32) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// A C string; NUL bytes inside (from client data echoed back) are dropped so that the
    /// framing stays intact.
    fn cstr(&mut self, text: &str) {
        self.bytes
            .extend(text.as_bytes().iter().copied().filter(|byte| *byte != 0));
        self.bytes.push(0);
    }

    fn simple(&mut self, tag: u8) {
        let at = self.begin(tag);
        self.end(at);
    }

    pub(crate) fn authentication_ok(&mut self) {
        let at = self.begin(b'R');
        self.i32(0);
        self.end(at);
    }

    /// AuthenticationSASL (10) offering SCRAM-SHA-256, AuthenticationSASLContinue (11) and
    /// AuthenticationSASLFinal (12) with their data.
    pub(crate) fn authentication_sasl(&mut self, code: i32, data: &[u8]) {
        let at = self.begin(b'R');
        self.i32(code);
        if code == 10 {
            self.cstr(crate::security::scram::MECHANISM);
            self.bytes.push(0);
        } else {
            self.bytes.extend_from_slice(data);
        }
        self.end(at);
    }

    pub(crate) fn parameter_status(&mut self, name: &str, value: &str) {
        let at = self.begin(b'S');
        self.cstr(name);
        self.cstr(value);
        self.end(at);
    }

    pub(crate) fn backend_key_data(&mut self, process_id: i32, secret: i32) {
        let at = self.begin(b'K');
        self.i32(process_id);
        self.i32(secret);
        self.end(at);
    }

    pub(crate) fn negotiate_protocol_version(&mut self, minor: i32, unrecognized: &[String]) {
        let at = self.begin(b'v');
        self.i32(minor);
        self.i32(i32::try_from(unrecognized.len()).unwrap_or(i32::MAX));
        for option in unrecognized {
            self.cstr(option);
        }
        self.end(at);
    }

    /// The transaction status: 'I' idle, 'T' in a transaction block, 'E' in a failed one.
    pub(crate) fn ready_for_query(&mut self, status: u8) {
        debug_assert!(matches!(status, b'I' | b'T' | b'E'));
        let at = self.begin(b'Z');
        self.bytes.push(status);
        self.end(at);
    }

    pub(crate) fn row_description(&mut self, columns: &[OutputColumn], formats: &[i16]) {
        let at = self.begin(b'T');
        self.i16(i16::try_from(columns.len()).unwrap_or(i16::MAX));
        for (index, column) in columns.iter().enumerate() {
            let pg_type = sql::types::pg_type(column.data_type);
            self.cstr(&column.name);
            self.i32(0); // table OID
            self.i16(0); // column attribute number
            self.i32(i32::try_from(pg_type.oid).unwrap_or(0));
            self.i16(pg_type.typlen);
            self.i32(sql::types::type_modifier(column.data_type));
            self.i16(formats.get(index).copied().unwrap_or(0));
        }
        self.end(at);
    }

    /// One row; `types` are the columns' types as RowDescription announced them (SMALLINT
    /// and REAL values are encoded as int2 and float4 by them).
    pub(crate) fn data_row(&mut self, row: &[Value], formats: &[i16], types: &[DataType]) {
        let at = self.begin(b'D');
        self.i16(i16::try_from(row.len()).unwrap_or(i16::MAX));
        for (index, value) in row.iter().enumerate() {
            let binary = formats.get(index).copied().unwrap_or(0) == 1;
            let encoded = match (types.get(index), binary) {
                (Some(data_type), true) => sql::types::encode_binary_as(value, *data_type),
                (Some(data_type), false) => {
                    sql::types::encode_text_as(value, *data_type).map(String::into_bytes)
                }
                (None, true) => sql::types::encode_binary(value),
                (None, false) => sql::types::encode_text(value).map(String::into_bytes),
            };
            match encoded {
                None => self.i32(-1),
                Some(bytes) => {
                    self.bytes.extend_from_slice(&length_i32(bytes.len()));
                    self.bytes.extend_from_slice(&bytes);
                }
            }
        }
        self.end(at);
    }

    pub(crate) fn command_complete(&mut self, tag: &str) {
        let at = self.begin(b'C');
        self.cstr(tag);
        self.end(at);
    }

    pub(crate) fn empty_query_response(&mut self) {
        self.simple(b'I');
    }

    pub(crate) fn parse_complete(&mut self) {
        self.simple(b'1');
    }

    pub(crate) fn bind_complete(&mut self) {
        self.simple(b'2');
    }

    pub(crate) fn close_complete(&mut self) {
        self.simple(b'3');
    }

    pub(crate) fn no_data(&mut self) {
        self.simple(b'n');
    }

    pub(crate) fn portal_suspended(&mut self) {
        self.simple(b's');
    }

    pub(crate) fn parameter_description(&mut self, oids: &[u32]) {
        let at = self.begin(b't');
        self.i16(i16::try_from(oids.len()).unwrap_or(i16::MAX));
        for oid in oids {
            self.i32(i32::try_from(*oid).unwrap_or(0));
        }
        self.end(at);
    }

    /// CopyInResponse, text format for every column.
    pub(crate) fn copy_in_response(&mut self, columns: usize) {
        let at = self.begin(b'G');
        self.bytes.push(0);
        let columns = i16::try_from(columns).unwrap_or(i16::MAX);
        self.i16(columns);
        for _ in 0..columns {
            self.i16(0);
        }
        self.end(at);
    }

    /// ErrorResponse ('E') or NoticeResponse ('N').
    fn fields(&mut self, tag: u8, severity: &str, error: &SqlError) {
        let at = self.begin(tag);
        for (field, value) in [(b'S', severity), (b'V', severity), (b'C', error.code)] {
            self.bytes.push(field);
            self.cstr(value);
        }
        self.bytes.push(b'M');
        self.cstr(&error.message);
        if let Some(detail) = &error.detail {
            self.bytes.push(b'D');
            self.cstr(detail);
        }
        if let Some(hint) = &error.hint {
            self.bytes.push(b'H');
            self.cstr(hint);
        }
        self.bytes.push(0);
        self.end(at);
    }

    pub(crate) fn error_response(&mut self, severity: &str, error: &SqlError) {
        self.fields(b'E', severity, error);
    }

    pub(crate) fn notice_response(&mut self, severity: &str, notice: &SqlError) {
        self.fields(b'N', severity, notice);
    }
}
