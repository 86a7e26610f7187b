//! Small deterministic helpers shared by every Tessera crate.
//!
//! Nothing here reads a clock, a socket or the OS random source: protocol crates depend on
//! `stdx` and must stay runnable inside the simulator.
#![forbid(unsafe_code)]

mod prng;
mod timeout;

pub use prng::Prng;
pub use timeout::Timeout;

/// A 64-bit FNV-1a hasher: deterministic across runs and platforms (unlike `RandomState`), used
/// for trace hashes and entry digests.
#[derive(Clone, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv64 {
    pub fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn write_u64(&mut self, value: u64) {
        self.write(&value.to_le_bytes());
    }

    pub fn finish(&self) -> u64 {
        self.0
    }

    /// The digest of one byte string.
    pub fn digest(bytes: &[u8]) -> u64 {
        let mut hasher = Fnv64::default();
        hasher.write(bytes);
        hasher.finish()
    }
}
