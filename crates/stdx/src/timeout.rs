/// A timeout counted in ticks: the protocols' only notion of time.
///
/// A timeout is either stopped or running; `tick` advances it and `fired` says whether it has
/// reached its length. It never reads a clock, so the simulator controls time completely.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    pub name: &'static str,
    /// Ticks from start to firing.
    pub after_ticks: u64,
    ticks: u64,
    running: bool,
}

impl Timeout {
    pub fn new(name: &'static str, after_ticks: u64) -> Timeout {
        assert!(
            after_ticks > 0,
            "timeout {name} must last at least one tick"
        );
        Timeout {
            name,
            after_ticks,
            ticks: 0,
            running: false,
        }
    }

    pub fn start(&mut self) {
        self.ticks = 0;
        self.running = true;
    }

    pub fn stop(&mut self) {
        self.ticks = 0;
        self.running = false;
    }

    /// Restarts the count; a stopped timeout stays stopped.
    pub fn reset(&mut self) {
        self.ticks = 0;
    }

    pub fn running(&self) -> bool {
        self.running
    }

    pub fn tick(&mut self) {
        if self.running {
            self.ticks += 1;
        }
    }

    pub fn fired(&self) -> bool {
        self.running && self.ticks >= self.after_ticks
    }

    /// Changes the length, e.g. to add jitter before a restart.
    pub fn set_after_ticks(&mut self, after_ticks: u64) {
        assert!(after_ticks > 0);
        self.after_ticks = after_ticks;
    }
}

#[cfg(test)]
mod tests {
    use super::Timeout;

    #[test]
    fn fires_only_after_its_length_while_running() {
        let mut timeout = Timeout::new("test", 3);
        timeout.tick();
        assert!(!timeout.fired());
        timeout.start();
        timeout.tick();
        timeout.tick();
        assert!(!timeout.fired());
        timeout.tick();
        assert!(timeout.fired());
        timeout.reset();
        assert!(!timeout.fired());
        timeout.stop();
        for _ in 0..5 {
            timeout.tick();
        }
        assert!(!timeout.fired());
    }
}
