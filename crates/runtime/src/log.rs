//! Minimal logging to standard error: `[tessera r0 12.345s] level: message`.

use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<(Instant, String)> = OnceLock::new();

/// Names this process in every line (e.g. "r0").
pub fn init(name: String) {
    let _ = START.set((Instant::now(), name));
}

fn line(level: &str, message: std::fmt::Arguments<'_>) {
    let (start, name) = START.get_or_init(|| (Instant::now(), String::new()));
    eprintln!(
        "[tessera {name} {:.3}s] {level}: {message}",
        start.elapsed().as_secs_f64()
    );
}

pub fn info(message: std::fmt::Arguments<'_>) {
    line("info", message);
}

pub fn warn(message: std::fmt::Arguments<'_>) {
    line("warn", message);
}

pub fn error(message: std::fmt::Arguments<'_>) {
    line("error", message);
}
