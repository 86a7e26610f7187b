//! LCS (Redis 7.0's `lcsCommand`): the longest common subsequence of two strings, its length,
//! or the matching ranges, computed with Redis's table and walked back exactly as Redis walks
//! it, so that ties resolve to the same subsequence and ranges.

use crate::{Bytes, KvError, KvStore, Outcome};

/// The most cells (`(len(a)+1) * (len(b)+1)`) the table may have: 32 Mi cells of 4 bytes
/// (128 MiB). Larger inputs are refused with Redis's memory error rather than letting one
/// command exhaust the process that runs it.
pub const LCS_CELLS_MAX: u64 = 1 << 25;

/// What LCS replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum LcsReply {
    /// Slot 0. The subsequence itself.
    Text,
    /// Slot 1. LEN: its length.
    Length,
    /// Slot 2. IDX: the matching ranges of at least `min_match_len` bytes, last first, and
    /// the length (`Outcome::Integers`: `[length, a_start, a_end, b_start, b_end, match_len,
    /// …]`; the planner's reply shape nests them).
    Indexes { min_match_len: u64 },
}

/// The subsequence, and the matching ranges (`[a_start, a_end, b_start, b_end]`, from the end
/// of the strings backwards, as Redis emits them).
pub fn lcs(a: &[u8], b: &[u8]) -> (Bytes, Vec<[u64; 4]>) {
    let width = b.len() + 1;
    let mut table = vec![0u32; (a.len() + 1) * width];
    let cell = |i: usize, j: usize| i * width + j;
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[cell(i, j)] = if a[i - 1] == b[j - 1] {
                table[cell(i - 1, j - 1)] + 1
            } else {
                table[cell(i - 1, j)].max(table[cell(i, j - 1)])
            };
        }
    }
    let length = table[cell(a.len(), b.len())] as usize;
    let mut result = vec![0u8; length];
    let mut ranges = Vec::new();
    let (mut i, mut j, mut index) = (a.len(), b.len(), length);
    // `None`: no range is being tracked.
    let mut range: Option<[usize; 4]> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[index - 1] = a[i - 1];
            match &mut range {
                None => range = Some([i - 1, i - 1, j - 1, j - 1]),
                Some(current) if current[0] == i && current[2] == j => {
                    current[0] -= 1;
                    current[2] -= 1;
                }
                Some(_) => emit = true,
            }
            if range.is_some_and(|current| current[0] == 0 || current[2] == 0) {
                emit = true;
            }
            index -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[cell(i - 1, j)] > table[cell(i, j - 1)] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = range.is_some();
        }
        if emit {
            if let Some([a_start, a_end, b_start, b_end]) = range.take() {
                ranges.push([a_start as u64, a_end as u64, b_start as u64, b_end as u64]);
            }
        }
    }
    (result, ranges)
}

impl KvStore {
    pub(crate) fn lcs_keys(
        &self,
        first: &[u8],
        second: &[u8],
        reply: LcsReply,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        let text = |key: &[u8]| -> Result<Bytes, KvError> {
            match self.live_string(key, now_ms) {
                Ok(value) => Ok(value.cloned().unwrap_or_default()),
                Err(_) => Err(KvError::LcsNotStrings),
            }
        };
        let (a, b) = (text(first)?, text(second)?);
        let cells = (a.len() as u64 + 1).saturating_mul(b.len() as u64 + 1);
        if cells > LCS_CELLS_MAX {
            return Err(KvError::LcsTooLarge);
        }
        let (subsequence, ranges) = lcs(&a, &b);
        Ok(match reply {
            LcsReply::Text => Outcome::Value(Some(subsequence)),
            LcsReply::Length => Outcome::Integer(subsequence.len() as i64),
            LcsReply::Indexes { min_match_len } => {
                let mut numbers = vec![subsequence.len() as i64];
                for [a_start, a_end, b_start, b_end] in ranges {
                    let match_len = a_end - a_start + 1;
                    if match_len >= min_match_len {
                        numbers.extend(
                            [a_start, a_end, b_start, b_end, match_len].map(|number| number as i64),
                        );
                    }
                }
                Outcome::Integers(numbers)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_redis_7_0s() {
        // Redis 7.0.15: LCS of ohmytext / mynewtext is "mytext"; IDX gives [[4,7],[5,8]],
        // [[2,3],[0,1]].
        let (text, ranges) = lcs(b"ohmytext", b"mynewtext");
        assert_eq!(text, b"mytext");
        assert_eq!(ranges, vec![[4, 7, 5, 8], [2, 3, 0, 1]]);
        assert_eq!(lcs(b"", b"abc"), (Vec::new(), Vec::new()));
    }
}
