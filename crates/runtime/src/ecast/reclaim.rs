//! Active expiry (`docs/internals/redis.md`, "Active expiry"): a gateway that coordinated a
//! write giving a key an expiry (`pubsub::Hub::note_expiry`) looks, about once a second until
//! that time has passed, for the keys expired at its clock's time (one survey, a read of every
//! arc at one point of the order) and deletes each with a replicated `kv::Command::Reclaim`
//! stamped with that time, which deletes the key only if it is still expired at that stamp (a
//! key written again meanwhile stays). Each delete that happened is notified as `expired`
//! (class `x`) by the gateway whose reclaim deleted it: the deletes are ordered, so exactly one
//! finds the key expired, and the event is published once however many gateways race for it.
//! A gateway with no expiry pending sends nothing, so an idle cluster stays idle.

use super::gateway::{Job, Work};
use super::payload::{self, Survey};
use ecast::Isolation;
use kv::{Command, Outcome};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How often each gateway looks for expired keys.
const RECLAIM_PERIOD_MS: u64 = 1_000;
/// At most this many expired keys per arc per round (the rest wait for the next round).
const RECLAIM_KEYS_MAX: u64 = 1_000;

/// The reclaimer of one gateway: runs until the gateway's job queue closes.
pub(super) async fn run(jobs: mpsc::Sender<Job>, notifier: super::pubsub::Notifier) {
    // A random first pause, so that a cluster's gateways do not all survey at once.
    let offset = crate::os::random_u64() % RECLAIM_PERIOD_MS;
    tokio::time::sleep(Duration::from_millis(offset)).await;
    loop {
        tokio::time::sleep(Duration::from_millis(RECLAIM_PERIOD_MS)).await;
        if jobs.is_closed() {
            return;
        }
        // One period past the latest expiry: the last key is deleted in the round after it.
        if crate::os::unix_now_ms() <= notifier.hub.expiries_until_ms() + RECLAIM_PERIOD_MS {
            reclaim_once(&jobs, &notifier).await;
        }
    }
}

/// Reads the cluster's keyspace notification flags into the hub; whether it could.
pub(super) async fn read_notify_flags(jobs: &mpsc::Sender<Job>, hub: &super::pubsub::Hub) -> bool {
    let Some(outcome) = submit(jobs, Work::Survey(Survey::ReadConfig)).await else {
        return false;
    };
    match payload::decode_config(&outcome) {
        Some((_, flags)) => {
            hub.set_notify_flags(flags);
            true
        }
        None => false,
    }
}

/// One round: the survey, then one delete per expired key (all submitted before any is
/// awaited); how many keys it deleted.
async fn reclaim_once(jobs: &mpsc::Sender<Job>, notifier: &super::pubsub::Notifier) -> usize {
    let now_ms = crate::os::unix_now_ms();
    let survey = Survey::Expired {
        now_ms,
        limit: RECLAIM_KEYS_MAX,
    };
    let Some(Outcome::Values(keys)) = submit(jobs, Work::Survey(survey)).await else {
        return 0;
    };
    let mut waiting = Vec::new();
    for key in keys.into_iter().flatten() {
        let command = Command::Reclaim { key: key.clone() }.stamped(now_ms);
        let Ok(split) = payload::split(&command) else {
            continue;
        };
        let (reply, receiver) = oneshot::channel();
        let job = Job {
            work: Work::Keyed(split),
            isolation: Isolation::Sequential,
            reply,
        };
        if jobs.send(job).await.is_err() {
            return 0;
        }
        waiting.push((key, receiver));
    }
    let mut deleted = 0;
    for (key, receiver) in waiting {
        // A locked key (a multi-key command holds it) or an unavailable partition: the next
        // round tries again.
        if let Ok(Outcome::Integer(1)) = receiver.await {
            deleted += 1;
            notifier.notify_event(&resp::notify::Event {
                class: resp::notify::EXPIRED,
                name: "expired",
                key,
            });
        }
    }
    deleted
}

async fn submit(jobs: &mpsc::Sender<Job>, work: Work) -> Option<Outcome> {
    let (reply, receiver) = oneshot::channel();
    let job = Job {
        work,
        isolation: Isolation::Sequential,
        reply,
    };
    jobs.send(job).await.ok()?;
    receiver.await.ok()
}
