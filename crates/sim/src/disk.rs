//! A simulated disk for `disk` durability: records are written in order with a latency; a crash
//! keeps what completed, may keep a prefix of what was in flight (a torn tail loses the rest).

use std::collections::VecDeque;
use stdx::Prng;
use vr::Record;

#[derive(Default)]
pub struct Disk {
    /// Records known durable, in write order.
    pub durable: Vec<Record>,
    /// Records written but not yet durable: (completion tick, sequence, record).
    in_flight: VecDeque<(u64, u64, Record)>,
}

impl Disk {
    pub fn write(&mut self, now: u64, latency: u64, sequence: u64, record: Record) {
        // Writes complete in order: never before the previous one.
        let previous = self.in_flight.back().map_or(0, |(tick, _, _)| *tick);
        self.in_flight
            .push_back((previous.max(now + latency), sequence, record));
    }

    /// Completes writes due by `now`; returns the highest completed sequence, if any.
    pub fn complete(&mut self, now: u64) -> Option<u64> {
        let mut completed = None;
        while self
            .in_flight
            .front()
            .is_some_and(|(tick, _, _)| *tick <= now)
        {
            let (_, sequence, record) = self.in_flight.pop_front().expect("front exists");
            self.durable.push(record);
            completed = Some(sequence);
        }
        completed
    }

    /// The process died: a random prefix of the in-flight writes reached the disk, the rest
    /// is torn off. Returns how many records were lost.
    pub fn crash(&mut self, prng: &mut Prng) -> usize {
        let reached = prng.below(self.in_flight.len() as u64 + 1) as usize;
        let lost = self.in_flight.len() - reached;
        for (_, _, record) in self.in_flight.drain(..).take(reached) {
            self.durable.push(record);
        }
        lost
    }
}
