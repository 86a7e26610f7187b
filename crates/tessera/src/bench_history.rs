//! `tessera bench kv --check`: every SET writes a value that names its write, every GET's reply
//! is decoded back into the write it returned, and the whole run's history (completed and
//! unknown-outcome operations) is checked for linearisability with `lincheck` at the end.
//!
//! A written value is `WRITE_TAG`, 16 hex digits of the write's id, then padding to the value
//! size. The id is `client << 40 | counter`, unique in the run. A GET that returns a value without
//! the tag (written by someone else, e.g. a load phase) cannot be placed in the history: the
//! check refuses such runs rather than ignore the operation (use `--key-prefix` to keep a checked
//! run's keys apart from loaded data).

use lincheck::{Budget, CheckResult, MapInput, MapOutput, Operation, RegisterMapModel};

const WRITE_TAG: &[u8] = b"tw:";
/// Bytes of a tagged value before its padding.
pub const TAGGED_LEN: usize = 3 + 16;

/// The value a checked SET writes: the tag, the id in hex, padding up to `size`.
pub fn tagged_value(id: u64, size: usize) -> Vec<u8> {
    let mut value = Vec::with_capacity(size.max(TAGGED_LEN));
    value.extend_from_slice(WRITE_TAG);
    value.extend_from_slice(format!("{id:016x}").as_bytes());
    value.resize(size.max(TAGGED_LEN), b'x');
    value
}

/// The write id a value carries; `None` if it is not a tagged value.
pub fn write_id(value: &[u8]) -> Option<u64> {
    let digits = value.strip_prefix(WRITE_TAG)?.get(..16)?;
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// The payload of a RESP bulk-string reply: `Some(None)` for a null bulk string, `None` if the
/// reply is not a bulk string.
pub fn bulk(reply: &[u8]) -> Option<Option<&[u8]>> {
    let rest = reply.strip_prefix(b"$")?;
    let line_end = rest.windows(2).position(|pair| pair == b"\r\n")?;
    let length: i64 = std::str::from_utf8(&rest[..line_end]).ok()?.parse().ok()?;
    if length < 0 {
        return Some(None);
    }
    rest.get(line_end + 2..line_end + 2 + length as usize)
        .map(Some)
}

/// What one client observed, in the order it invoked its operations.
#[derive(Default)]
pub struct ClientHistory {
    pub operations: Vec<Operation<MapInput, MapOutput>>,
    /// GET replies that carried no write id (a foreign value): the history cannot be checked.
    pub foreign_reads: u64,
}

impl ClientHistory {
    pub fn completed(
        &mut self,
        client: u64,
        call: u64,
        now: u64,
        input: MapInput,
        output: MapOutput,
    ) {
        self.operations
            .push(Operation::completed(client, call, now, input, output));
    }

    /// An operation whose outcome is unknown (an error reply, or the connection broke).
    pub fn unknown(&mut self, client: u64, call: u64, input: MapInput) {
        match input {
            // A read that failed changed nothing and returned nothing: leave it out.
            MapInput::Get { .. } => {}
            _ => self
                .operations
                .push(Operation::pending(client, call, input)),
        }
    }
}

/// The verdict on a whole run.
pub struct Verdict {
    pub operations: usize,
    pub pending: usize,
    pub result: CheckResult,
    pub seconds: f64,
}

impl Verdict {
    pub fn describe(&self) -> String {
        let verdict = match &self.result {
            CheckResult::Ok => "linearizable".to_string(),
            CheckResult::Illegal(violation) => format!("NOT linearizable: {violation}"),
            CheckResult::Unknown => "unknown (the checker's budget ran out)".to_string(),
        };
        format!(
            "history: {} operations ({} with unknown outcome), {verdict}, checked in {:.1}s",
            self.operations, self.pending, self.seconds
        )
    }
}

pub fn check(histories: Vec<ClientHistory>) -> Result<Verdict, String> {
    let foreign: u64 = histories.iter().map(|history| history.foreign_reads).sum();
    if foreign > 0 {
        return Err(format!(
            "{foreign} reads returned values no checked client wrote (loaded data under the same \
             keys?): use --key-prefix to keep the checked keys apart"
        ));
    }
    let operations: Vec<_> = histories
        .into_iter()
        .flat_map(|history| history.operations)
        .collect();
    let pending = operations
        .iter()
        .filter(|operation| operation.is_pending())
        .count();
    let started = std::time::Instant::now();
    let result = lincheck::check(&RegisterMapModel, &operations, Budget::steps(2_000_000_000));
    Ok(Verdict {
        operations: operations.len(),
        pending,
        result,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_value_carries_its_write_id_back() {
        let value = tagged_value(0xdead_beef << 8, 100);
        assert_eq!(value.len(), 100);
        assert_eq!(write_id(&value), Some(0xdead_beef << 8));
        assert_eq!(write_id(b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), None);
        assert_eq!(write_id(b"tw:12"), None);
        assert_eq!(tagged_value(1, 4).len(), TAGGED_LEN);
    }

    #[test]
    fn bulk_replies_decode() {
        assert_eq!(bulk(b"$5\r\nhello\r\n"), Some(Some(&b"hello"[..])));
        assert_eq!(bulk(b"$-1\r\n"), Some(None));
        assert_eq!(bulk(b"+OK\r\n"), None);
        assert_eq!(bulk(b"$9\r\nhello\r\n"), None);
    }

    /// The canary: a run in which one read returns an overwritten value is caught.
    #[test]
    fn a_stale_read_fails_the_check_and_a_clean_history_passes() {
        let put = |value| MapInput::Put { key: 1, value };
        let get = MapInput::Get { key: 1 };
        let mut clean = ClientHistory::default();
        clean.completed(0, 0, 10, put(1), MapOutput::Ok);
        clean.completed(0, 11, 20, put(2), MapOutput::Ok);
        clean.completed(0, 21, 30, get, MapOutput::Value(Some(2)));
        clean.unknown(0, 31, put(3));
        clean.unknown(0, 32, get);
        let verdict = check(vec![clean]).unwrap();
        assert!(verdict.result.is_ok(), "{}", verdict.describe());
        assert_eq!((verdict.operations, verdict.pending), (4, 1));

        let mut stale = ClientHistory::default();
        stale.completed(0, 0, 10, put(1), MapOutput::Ok);
        stale.completed(0, 11, 20, put(2), MapOutput::Ok);
        stale.completed(1, 21, 30, get, MapOutput::Value(Some(1)));
        assert!(check(vec![stale]).unwrap().result.is_illegal());

        let foreign = ClientHistory {
            foreign_reads: 1,
            ..ClientHistory::default()
        };
        assert!(check(vec![foreign]).is_err());
    }
}
