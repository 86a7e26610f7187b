//! What the runtime reads from the operating system for the protocols above it: randomness for
//! identifiers and seeds, and the wall clock for timestamps stamped where an operation is
//! ordered (Redis expiry). Protocol code never calls these; the runtime passes their values in.

/// A random 64-bit value (sender and client ids, seeds): the standard library's randomly keyed
/// hasher over the time and the process id.
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// Microseconds since the Unix epoch (0 if the clock is before it): the time a SQL statement
/// is stamped with at the gateway (`sql::plan_statement_at`).
pub fn unix_now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX)
        })
}

/// What the gateway stamps on a SQL statement: its time and 128 random bits for
/// `gen_random_uuid()` (`sql::StatementStamp`).
pub fn statement_stamp() -> sql::StatementStamp {
    let mut bytes = [0u8; 16];
    // The system source; should it ever fail, the standard library's keyed hasher still gives
    // values that differ between processes and calls.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        bytes[..8].copy_from_slice(&random_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&random_u64().to_be_bytes());
    }
    sql::StatementStamp {
        now_us: unix_now_us(),
        entropy: u128::from_be_bytes(bytes),
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// Gives the calling thread a lower scheduling priority than the rest of its process
/// (`nice` + `BACKGROUND_NICE_STEP` on Linux, per thread), so that the protocol loops of this
/// process run first when the cores are busy: a long scan off the loop must never delay a
/// heartbeat. Relative to the process's own priority, so that a process run at a high
/// priority keeps its background work above other programs' too. Best effort: where the
/// calls fail nothing changes.
pub fn yield_to_loops() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain system calls with no pointers; a failure only leaves the priority as is.
        unsafe {
            let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
            let nice = libc::getpriority(libc::PRIO_PROCESS, thread);
            libc::setpriority(
                libc::PRIO_PROCESS,
                thread,
                (nice + BACKGROUND_NICE_STEP).min(19),
            );
        }
    }
}

/// How much less priority threads working off the protocol loops get (`yield_to_loops`).
pub const BACKGROUND_NICE_STEP: i32 = 5;
