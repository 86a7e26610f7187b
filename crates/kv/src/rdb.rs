//! DUMP and RESTORE payloads: Redis's RDB serialisation of one value, as Redis 7.0 frames it —
//! the value's type byte and encoding, the RDB version (10) as two little-endian bytes, and a
//! CRC-64 (Jones, reflected, as Redis's `crc64`) of everything before it, little-endian.
//!
//! DUMP writes the plain RDB types every Redis since 2.x loads (string 0, list 1, set 2, hash 4,
//! sorted set 5 with binary scores), whatever Tessera's layout. RESTORE reads those, the
//! integer and LZF string encodings, and the compact types Redis 7.0 itself dumps (set as
//! intset 11, hash and sorted set as listpack 16/17, list as quicklist of listpacks 18), so a
//! payload dumped by redis-server 7.0 restores here. Untrusted input: every length is checked
//! against what is left before anything is allocated; nothing panics.

use crate::value::{Hash, List, Score, Set, SortedSet};
use crate::{Bytes, Value};

/// The RDB version Redis 7.0 writes (and the newest this reads).
pub const RDB_VERSION: u16 = 10;

/// Why a RESTORE payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdbError {
    /// The footer's version is newer than 10, or the checksum does not match.
    VersionOrChecksum,
    /// The value inside does not decode.
    BadFormat,
}

const TYPE_STRING: u8 = 0;
const TYPE_LIST: u8 = 1;
const TYPE_SET: u8 = 2;
const TYPE_ZSET: u8 = 3;
const TYPE_HASH: u8 = 4;
const TYPE_ZSET_2: u8 = 5;
const TYPE_SET_INTSET: u8 = 11;
const TYPE_HASH_LISTPACK: u8 = 16;
const TYPE_ZSET_LISTPACK: u8 = 17;
const TYPE_LIST_QUICKLIST_2: u8 = 18;

/// CRC-64/Jones as Redis computes it (reflected, polynomial 0xad93d23594c935a9, no final
/// xor): `crc64(0, "123456789") == 0xe9c6d914c4b8d9ca`.
pub fn crc64(bytes: &[u8]) -> u64 {
    const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut crc = 0u64;
    for byte in bytes {
        crc ^= u64::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
        }
    }
    crc
}

fn put_length(out: &mut Vec<u8>, length: u64) {
    if length < 1 << 6 {
        out.push(length as u8);
    } else if length < 1 << 14 {
        out.push(0x40 | (length >> 8) as u8);
        out.push(length as u8);
    } else if length <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(length as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&length.to_be_bytes());
    }
}

fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_length(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// DUMP's payload for a value; `None` for a stream (its RDB form is not built).
pub fn dump(value: &Value) -> Option<Bytes> {
    let mut out = Vec::new();
    match value {
        Value::Stream(_) => return None,
        Value::String(bytes) => {
            out.push(TYPE_STRING);
            put_string(&mut out, bytes);
        }
        Value::List(list) => {
            out.push(TYPE_LIST);
            put_length(&mut out, list.len() as u64);
            for item in list.iter() {
                put_string(&mut out, item);
            }
        }
        Value::Set(set) => {
            out.push(TYPE_SET);
            put_length(&mut out, set.len() as u64);
            for member in set.iter() {
                put_string(&mut out, &member);
            }
        }
        Value::Hash(hash) => {
            out.push(TYPE_HASH);
            put_length(&mut out, hash.len() as u64);
            for (field, value) in hash.iter() {
                put_string(&mut out, field);
                put_string(&mut out, value);
            }
        }
        Value::SortedSet(sorted) => {
            out.push(TYPE_ZSET_2);
            put_length(&mut out, sorted.len() as u64);
            for (member, score) in sorted.iter() {
                put_string(&mut out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Some(out)
}

/// RESTORE's value from a payload (collections in the encodings their contents would have if
/// built from empty; the caller fits them to its limits).
pub fn load(payload: &[u8]) -> Result<Value, RdbError> {
    if payload.len() < 10 {
        return Err(RdbError::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..10].try_into().expect("eight bytes"));
    if version > RDB_VERSION || crc64(&payload[..payload.len() - 8]) != crc {
        return Err(RdbError::VersionOrChecksum);
    }
    let mut reader = Reader { bytes: body, at: 0 };
    let value = reader.value()?;
    if reader.at != body.len() {
        return Err(RdbError::BadFormat);
    }
    Ok(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A length or a special string encoding (`0xC0…`).
enum Length {
    Plain(u64),
    Encoded(u8),
}

impl Reader<'_> {
    fn take(&mut self, count: usize) -> Result<&[u8], RdbError> {
        let end = self.at.checked_add(count).ok_or(RdbError::BadFormat)?;
        let taken = self.bytes.get(self.at..end).ok_or(RdbError::BadFormat)?;
        self.at = end;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn length_or_encoding(&mut self) -> Result<Length, RdbError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Length::Plain(u64::from(first & 0x3f)),
            1 => Length::Plain((u64::from(first & 0x3f) << 8) | u64::from(self.byte()?)),
            2 if first == 0x80 => Length::Plain(u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().expect("four bytes"),
            ))),
            2 if first == 0x81 => Length::Plain(u64::from_be_bytes(
                self.take(8)?.try_into().expect("eight bytes"),
            )),
            3 => Length::Encoded(first & 0x3f),
            _ => return Err(RdbError::BadFormat),
        })
    }

    /// A collection's element count: each element takes at least one byte, so a count past
    /// what is left is refused before anything is allocated for it.
    fn count(&mut self) -> Result<usize, RdbError> {
        match self.length_or_encoding()? {
            Length::Plain(count) if count <= self.remaining() as u64 => Ok(count as usize),
            _ => Err(RdbError::BadFormat),
        }
    }

    fn string(&mut self) -> Result<Bytes, RdbError> {
        match self.length_or_encoding()? {
            Length::Plain(length) => {
                let length = usize::try_from(length).map_err(|_| RdbError::BadFormat)?;
                Ok(self.take(length)?.to_vec())
            }
            Length::Encoded(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Length::Encoded(1) => Ok(i16::from_le_bytes(self.take(2)?.try_into().expect("two"))
                .to_string()
                .into_bytes()),
            Length::Encoded(2) => Ok(i32::from_le_bytes(self.take(4)?.try_into().expect("four"))
                .to_string()
                .into_bytes()),
            Length::Encoded(3) => {
                let compressed = self.plain_length()?;
                let length = self.plain_length()?;
                let input = self.take(compressed)?;
                lzf_decompress(input, length)
            }
            Length::Encoded(_) => Err(RdbError::BadFormat),
        }
    }

    fn plain_length(&mut self) -> Result<usize, RdbError> {
        match self.length_or_encoding()? {
            Length::Plain(length) => usize::try_from(length).map_err(|_| RdbError::BadFormat),
            Length::Encoded(_) => Err(RdbError::BadFormat),
        }
    }

    fn value(&mut self) -> Result<Value, RdbError> {
        let kind = self.byte()?;
        let value = match kind {
            TYPE_STRING => Value::String(self.string()?),
            TYPE_LIST => {
                let mut list = List::default();
                for _ in 0..self.count()? {
                    list.push_back(self.string()?);
                }
                Value::List(list)
            }
            TYPE_SET => {
                let mut set = Set::default();
                for _ in 0..self.count()? {
                    set.insert(self.string()?);
                }
                Value::Set(set)
            }
            TYPE_HASH => {
                let mut hash = Hash::default();
                for _ in 0..self.count()? {
                    let field = self.string()?;
                    hash.insert(field, self.string()?);
                }
                Value::Hash(hash)
            }
            TYPE_ZSET | TYPE_ZSET_2 => {
                let mut sorted = SortedSet::default();
                for _ in 0..self.count()? {
                    let member = self.string()?;
                    let score = if kind == TYPE_ZSET_2 {
                        f64::from_le_bytes(self.take(8)?.try_into().expect("eight bytes"))
                    } else {
                        let length = usize::from(self.byte()?);
                        match length {
                            253 => f64::NAN,
                            254 => f64::INFINITY,
                            255 => f64::NEG_INFINITY,
                            _ => parse_score(self.take(length)?)?,
                        }
                    };
                    sorted.insert(member, Score::new(score).ok_or(RdbError::BadFormat)?);
                }
                Value::SortedSet(sorted)
            }
            TYPE_SET_INTSET => {
                let mut set = Set::default();
                for member in intset(&self.string()?)? {
                    set.insert(member.to_string().into_bytes());
                }
                Value::Set(set)
            }
            TYPE_HASH_LISTPACK => {
                let entries = listpack(&self.string()?)?;
                if entries.len() % 2 == 1 {
                    return Err(RdbError::BadFormat);
                }
                let mut hash = Hash::default();
                for pair in entries.chunks(2) {
                    hash.insert(pair[0].clone(), pair[1].clone());
                }
                Value::Hash(hash)
            }
            TYPE_ZSET_LISTPACK => {
                let entries = listpack(&self.string()?)?;
                if entries.len() % 2 == 1 {
                    return Err(RdbError::BadFormat);
                }
                let mut sorted = SortedSet::default();
                for pair in entries.chunks(2) {
                    let score = Score::new(parse_score(&pair[1])?).ok_or(RdbError::BadFormat)?;
                    sorted.insert(pair[0].clone(), score);
                }
                Value::SortedSet(sorted)
            }
            TYPE_LIST_QUICKLIST_2 => {
                let mut list = List::default();
                for _ in 0..self.count()? {
                    let container = self.plain_length()?;
                    let node = self.string()?;
                    match container {
                        // PLAIN: one item as is.
                        1 => list.push_back(node),
                        // PACKED: a listpack of items.
                        2 => {
                            for item in listpack(&node)? {
                                list.push_back(item);
                            }
                        }
                        _ => return Err(RdbError::BadFormat),
                    }
                }
                Value::List(list)
            }
            _ => return Err(RdbError::BadFormat),
        };
        if !value.is_valid() {
            return Err(RdbError::BadFormat);
        }
        Ok(value)
    }
}

fn parse_score(text: &[u8]) -> Result<f64, RdbError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|text| crate::value::parse_float(text.as_bytes()))
        .ok_or(RdbError::BadFormat)
}

/// An intset blob: encoding (2, 4 or 8 bytes a member), count, members little-endian.
fn intset(blob: &[u8]) -> Result<Vec<i64>, RdbError> {
    if blob.len() < 8 {
        return Err(RdbError::BadFormat);
    }
    let width = u32::from_le_bytes(blob[0..4].try_into().expect("four")) as usize;
    let count = u32::from_le_bytes(blob[4..8].try_into().expect("four")) as usize;
    if !matches!(width, 2 | 4 | 8) || blob.len() != 8 + width.saturating_mul(count) {
        return Err(RdbError::BadFormat);
    }
    Ok(blob[8..]
        .chunks(width)
        .map(|member| match width {
            2 => i64::from(i16::from_le_bytes(member.try_into().expect("two"))),
            4 => i64::from(i32::from_le_bytes(member.try_into().expect("four"))),
            _ => i64::from_le_bytes(member.try_into().expect("eight")),
        })
        .collect())
}

/// A listpack blob's entries (Redis's `listpack.c`): a 6-byte header (total bytes, count),
/// entries (encoding, data, back-length), the end byte 0xFF.
fn listpack(blob: &[u8]) -> Result<Vec<Bytes>, RdbError> {
    if blob.len() < 7 || blob[blob.len() - 1] != 0xff {
        return Err(RdbError::BadFormat);
    }
    let total = u32::from_le_bytes(blob[0..4].try_into().expect("four")) as usize;
    if total != blob.len() {
        return Err(RdbError::BadFormat);
    }
    let mut entries = Vec::new();
    let mut at = 6;
    let end = blob.len() - 1;
    let slice = |from: usize, length: usize| -> Result<&[u8], RdbError> {
        blob.get(from..from.checked_add(length).ok_or(RdbError::BadFormat)?)
            .filter(|_| from + length <= end)
            .ok_or(RdbError::BadFormat)
    };
    while at < end {
        let first = blob[at];
        let (entry, encoded): (Bytes, usize) = if first & 0x80 == 0 {
            ((first & 0x7f).to_string().into_bytes(), 1)
        } else if first & 0xc0 == 0x80 {
            let length = usize::from(first & 0x3f);
            (slice(at + 1, length)?.to_vec(), 1 + length)
        } else if first & 0xe0 == 0xc0 {
            let raw = (u16::from(first & 0x1f) << 8)
                | u16::from(*slice(at + 1, 1)?.first().ok_or(RdbError::BadFormat)?);
            // 13-bit two's complement.
            let value = if raw & 0x1000 != 0 {
                i64::from(raw) - 0x2000
            } else {
                i64::from(raw)
            };
            (value.to_string().into_bytes(), 2)
        } else if first & 0xf0 == 0xe0 {
            let length = (usize::from(first & 0x0f) << 8) | usize::from(slice(at + 1, 1)?[0]);
            (slice(at + 2, length)?.to_vec(), 2 + length)
        } else {
            match first {
                0xf0 => {
                    let length =
                        u32::from_le_bytes(slice(at + 1, 4)?.try_into().expect("four")) as usize;
                    (slice(at + 5, length)?.to_vec(), 5 + length)
                }
                0xf1 => (
                    i64::from(i16::from_le_bytes(
                        slice(at + 1, 2)?.try_into().expect("two"),
                    ))
                    .to_string()
                    .into_bytes(),
                    3,
                ),
                0xf2 => {
                    let bytes = slice(at + 1, 3)?;
                    let raw = i32::from_le_bytes([0, bytes[0], bytes[1], bytes[2]]) >> 8;
                    (i64::from(raw).to_string().into_bytes(), 4)
                }
                0xf3 => (
                    i64::from(i32::from_le_bytes(
                        slice(at + 1, 4)?.try_into().expect("four"),
                    ))
                    .to_string()
                    .into_bytes(),
                    5,
                ),
                0xf4 => (
                    i64::from_le_bytes(slice(at + 1, 8)?.try_into().expect("eight"))
                        .to_string()
                        .into_bytes(),
                    9,
                ),
                _ => return Err(RdbError::BadFormat),
            }
        };
        // The back-length: 1 byte per 7 bits of the encoded size.
        let back = match encoded {
            0..=127 => 1,
            128..=16_383 => 2,
            16_384..=2_097_151 => 3,
            2_097_152..=268_435_455 => 4,
            _ => 5,
        };
        at = at
            .checked_add(encoded + back)
            .filter(|next| *next <= end)
            .ok_or(RdbError::BadFormat)?;
        entries.push(entry);
    }
    Ok(entries)
}

/// LZF decompression (Redis's `lzf_d.c`) into exactly `length` bytes.
fn lzf_decompress(input: &[u8], length: usize) -> Result<Bytes, RdbError> {
    let mut out: Vec<u8> = Vec::with_capacity(length.min(input.len().saturating_mul(64)));
    let mut at = 0;
    while at < input.len() {
        let control = usize::from(input[at]);
        at += 1;
        if control < 32 {
            let run = control + 1;
            let literal = input.get(at..at + run).ok_or(RdbError::BadFormat)?;
            out.extend_from_slice(literal);
            at += run;
        } else {
            let mut run = control >> 5;
            if run == 7 {
                run += usize::from(*input.get(at).ok_or(RdbError::BadFormat)?);
                at += 1;
            }
            let low = usize::from(*input.get(at).ok_or(RdbError::BadFormat)?);
            at += 1;
            let back = ((control & 0x1f) << 8) + low + 1;
            if back > out.len() {
                return Err(RdbError::BadFormat);
            }
            for _ in 0..run + 2 {
                out.push(out[out.len() - back]);
            }
        }
        if out.len() > length {
            return Err(RdbError::BadFormat);
        }
    }
    if out.len() != length {
        return Err(RdbError::BadFormat);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_s() {
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn payloads_of_redis_7_0_restore() {
        // redis-server 7.0.15: `SET k 12345` then `DUMP k` (an integer-encoded string).
        let int_string = b"\x00\xc1\x39\x30\x0a\x00\x9d\x94\xea\x27\x93\xfc\x08\xb9";
        assert_eq!(load(int_string).unwrap(), Value::String(b"12345".to_vec()));
        let mut corrupted = int_string.to_vec();
        corrupted[2] ^= 1;
        assert_eq!(load(&corrupted), Err(RdbError::VersionOrChecksum));
        // `HSET h a 1 b xyz`: a listpack hash.
        let hash = b"\x10\x14\x14\x00\x00\x00\x04\x00\x81\x61\x02\x01\x01\x81\x62\x02\x83\x78\x79\x7a\x04\xff\x0a\x00\x2e\x2c\x22\x6e\x65\x3d\x1f\xc4";
        let Value::Hash(loaded) = load(hash).unwrap() else {
            panic!("a hash")
        };
        assert_eq!(loaded.get(b"a"), Some(&b"1".to_vec()));
        assert_eq!(loaded.get(b"b"), Some(&b"xyz".to_vec()));
        // `SADD is 1 2 300`: an intset.
        let intset = b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x2c\x01\x0a\x00\xe5\x10\xb2\x8e\x7b\x95\x29\xaa";
        let Value::Set(loaded) = load(intset).unwrap() else {
            panic!("a set")
        };
        assert_eq!(
            loaded.iter().collect::<Vec<_>>(),
            vec![b"1".to_vec(), b"2".to_vec(), b"300".to_vec()]
        );
    }

    #[test]
    fn dump_and_load_round_trip_every_type() {
        let mut list = List::default();
        for item in [&b"a"[..], b"127", &[b'x'; 300]] {
            list.push_back(item.to_vec());
        }
        let mut sorted = SortedSet::default();
        sorted.insert(b"m".to_vec(), Score::new(1.5).unwrap());
        sorted.insert(b"n".to_vec(), Score::new(f64::INFINITY).unwrap());
        let mut hash = Hash::default();
        hash.insert(b"f".to_vec(), vec![b'v'; 70_000]);
        let mut set = Set::default();
        set.insert(b"1".to_vec());
        set.insert(b"x".to_vec());
        for value in [
            Value::String(b"hello".to_vec()),
            Value::List(list),
            Value::SortedSet(sorted),
            Value::Hash(hash),
            Value::Set(set),
        ] {
            let payload = dump(&value).expect("not a stream");
            assert_eq!(load(&payload).unwrap(), value);
            assert_eq!(
                load(&payload[..payload.len() - 1]),
                Err(RdbError::VersionOrChecksum)
            );
        }
    }
}
