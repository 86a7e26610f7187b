//! Replica-to-replica links: one TCP connection per pair (the lower index dials the higher one,
//! with reconnect and backoff), a Hello frame first, then wire frames of VR messages in both
//! directions. Outgoing messages queue in a bounded per-peer outbox; the writer coalesces every
//! queued message into one write. A full outbox drops messages: the protocol resends.

use crate::log;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Mutex};
use wire::{Message, ReplicaIndex};

/// The first frame on every peer connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub cluster: u64,
    pub replica: ReplicaIndex,
}

/// Messages arriving from peers.
pub type Inbound = mpsc::Sender<(ReplicaIndex, Message)>;

/// One peer's outbox, shared by whichever connection to that peer is current.
pub type Outbox = Arc<Mutex<mpsc::Receiver<Outgoing>>>;

/// A message queued for a peer, with when it was queued (for `DEBUG PEER-DELAY`).
pub type Outgoing = (tokio::time::Instant, Message);

pub const OUTBOX_MESSAGES_MAX: usize = 65_536;

#[derive(Clone)]
pub struct Links {
    pub cluster: u64,
    pub local: ReplicaIndex,
    pub frame_bytes_max: usize,
    /// Every write to a peer waits this many microseconds first (`DEBUG PEER-DELAY`, for
    /// benchmarks with a slow replica; tokio's timers round it up to whole milliseconds).
    pub send_delay_micros: Arc<std::sync::atomic::AtomicU64>,
}

/// Dials `peer` forever, running one connection at a time.
pub async fn dial(
    links: Links,
    peer: ReplicaIndex,
    address: SocketAddr,
    outbox: Outbox,
    inbound: Inbound,
) {
    let mut backoff = Duration::from_millis(20);
    loop {
        match TcpStream::connect(address).await {
            Ok(mut stream) => {
                backoff = Duration::from_millis(20);
                let hello = Hello {
                    cluster: links.cluster,
                    replica: links.local,
                };
                if stream.write_all(&wire::encode(&hello)).await.is_ok() {
                    log::info(format_args!("connected to replica {peer} at {address}"));
                    run_connection(
                        &links,
                        peer,
                        stream,
                        Vec::new(),
                        outbox.clone(),
                        inbound.clone(),
                    )
                    .await;
                    log::info(format_args!("connection to replica {peer} closed"));
                }
            }
            Err(_) => backoff = (backoff * 2).min(Duration::from_millis(500)),
        }
        tokio::time::sleep(backoff).await;
    }
}

/// Accepts peer connections forever.
pub async fn accept(
    links: Links,
    listener: TcpListener,
    outboxes: Vec<Option<Outbox>>,
    inbound: Inbound,
) {
    loop {
        let Ok((stream, remote)) = listener.accept().await else {
            continue;
        };
        let (links, outboxes, inbound) = (links.clone(), outboxes.clone(), inbound.clone());
        tokio::spawn(async move {
            let mut stream = stream;
            let _ = stream.set_nodelay(true);
            let (hello, already_read) = match read_hello(&mut stream, &links).await {
                Ok(hello) => hello,
                Err(reason) => {
                    log::warn(format_args!(
                        "refused peer connection from {remote}: {reason}"
                    ));
                    return;
                }
            };
            let Some(Some(outbox)) = outboxes.get(hello.replica.0 as usize).cloned() else {
                log::warn(format_args!(
                    "refused peer connection from {remote}: unknown replica {}",
                    hello.replica
                ));
                return;
            };
            log::info(format_args!(
                "replica {} connected from {remote}",
                hello.replica
            ));
            run_connection(&links, hello.replica, stream, already_read, outbox, inbound).await;
            log::info(format_args!(
                "connection from replica {} closed",
                hello.replica
            ));
        });
    }
}

/// Reads the Hello frame; returns it with the bytes read past it (the dialer sends messages
/// right behind its Hello, so one read may hold the start of the next frames).
async fn read_hello(stream: &mut TcpStream, links: &Links) -> Result<(Hello, Vec<u8>), String> {
    let mut buffer = Vec::with_capacity(64);
    let read = async {
        loop {
            match wire::decode::<Hello>(&buffer, 1024) {
                Ok((hello, consumed)) => return Ok((hello, buffer[consumed..].to_vec())),
                Err(wire::DecodeError::Incomplete { .. }) => {}
                Err(error) => return Err(error.to_string()),
            }
            let mut chunk = [0u8; 64];
            let read = stream
                .read(&mut chunk)
                .await
                .map_err(|error| error.to_string())?;
            if read == 0 {
                return Err("closed before hello".to_string());
            }
            buffer.extend_from_slice(&chunk[..read]);
            if buffer.len() > 1024 {
                return Err("no hello in the first 1 KiB".to_string());
            }
        }
    };
    let (hello, already_read) = tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .map_err(|_| "no hello within 5 s".to_string())??;
    if hello.cluster != links.cluster {
        return Err(format!(
            "cluster {} is not this cluster ({})",
            hello.cluster, links.cluster
        ));
    }
    if hello.replica == links.local {
        return Err("a replica cannot connect to itself".to_string());
    }
    Ok((hello, already_read))
}

/// Runs one connection until either direction fails. `already_read` holds bytes of the stream
/// read before (behind the Hello): the reader decodes them first.
async fn run_connection(
    links: &Links,
    peer: ReplicaIndex,
    stream: TcpStream,
    already_read: Vec<u8>,
    outbox: Outbox,
    inbound: Inbound,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let frame_bytes_max = links.frame_bytes_max;
    let send_delay_micros = links.send_delay_micros.clone();
    let read = async move {
        let mut buffer: Vec<u8> = already_read;
        let mut chunk = vec![0u8; 64 * 1024];
        let mut pending_first = !buffer.is_empty();
        loop {
            // Bytes that came with the Hello are decoded before anything new is read.
            if !std::mem::take(&mut pending_first) {
                let read = match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(read) => read,
                };
                buffer.extend_from_slice(&chunk[..read]);
            }
            let mut consumed_total = 0;
            loop {
                match wire::decode::<Message>(&buffer[consumed_total..], frame_bytes_max) {
                    Ok((message, consumed)) => {
                        consumed_total += consumed;
                        if inbound.send((peer, message)).await.is_err() {
                            return;
                        }
                    }
                    Err(wire::DecodeError::Incomplete { .. }) => break,
                    Err(error) => {
                        log::warn(format_args!(
                            "closing connection with replica {peer}: {error}"
                        ));
                        return;
                    }
                }
            }
            buffer.drain(..consumed_total);
        }
    };
    let write = async move {
        let mut outbox = outbox.lock().await;
        let mut buffer = Vec::with_capacity(64 * 1024);
        // With a send delay, every message leaves no earlier than `delay` after it was queued
        // (a message not yet due waits for the next write).
        let mut held: Option<Outgoing> = None;
        loop {
            let (queued, message) = match held.take() {
                Some(outgoing) => outgoing,
                None => match outbox.recv().await {
                    Some(outgoing) => outgoing,
                    None => return,
                },
            };
            let delay =
                Duration::from_micros(send_delay_micros.load(std::sync::atomic::Ordering::Relaxed));
            if !delay.is_zero() {
                tokio::time::sleep_until(queued + delay).await;
            }
            wire::encode_into(&message, &mut buffer);
            while buffer.len() < 1 << 20 {
                match outbox.try_recv() {
                    Ok((queued, message)) => {
                        if !delay.is_zero() && queued + delay > tokio::time::Instant::now() {
                            held = Some((queued, message));
                            break;
                        }
                        wire::encode_into(&message, &mut buffer);
                    }
                    Err(_) => break,
                }
            }
            if writer.write_all(&buffer).await.is_err() {
                return;
            }
            buffer.clear();
        }
    };
    tokio::select! {
        () = read => {}
        () = write => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dialer writes its Hello and its first messages in one write; none may be lost or
    /// misread (they once were: the Hello reader discarded the bytes behind the Hello).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn messages_sent_right_behind_the_hello_all_arrive() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let links = Links {
            cluster: 9,
            local: ReplicaIndex(1),
            frame_bytes_max: 1 << 20,
            send_delay_micros: Default::default(),
        };
        let (_sender, receiver) = mpsc::channel(16);
        let outboxes = vec![Some(Arc::new(Mutex::new(receiver))), None];
        let (inbound, mut arrived) = mpsc::channel(16);
        tokio::spawn(accept(links, listener, outboxes, inbound));

        let mut bytes = wire::encode(&Hello {
            cluster: 9,
            replica: ReplicaIndex(0),
        });
        let messages: Vec<Message> = (0..5)
            .map(|commit| Message::Commit {
                view: wire::View(1),
                commit: wire::Op(commit),
            })
            .collect();
        for message in &messages {
            wire::encode_into(message, &mut bytes);
        }
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(&bytes).await.unwrap();
        for expected in messages {
            let arrival = tokio::time::timeout(Duration::from_secs(5), arrived.recv()).await;
            let (from, message) = arrival
                .expect("the message arrives")
                .expect("the channel is open");
            assert_eq!(from, ReplicaIndex(0));
            assert_eq!(message, expected);
        }
    }
}
