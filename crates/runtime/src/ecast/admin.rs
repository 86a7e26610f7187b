//! The client side of a super process (Crescando/RB §6.1) over TCP: a VR client of the router
//! group that reads the configuration and submits configuration messages through an
//! `ecast::Sender` of its own, and asks storage processes for their migration progress. Used
//! by `tessera admin` and by a storage process that declares itself failed. The decisions
//! (what to plan, when a migration is done) are the caller's and the pure `placement` crate's;
//! this module only carries requests and answers.

use super::config::ClusterConfig;
use super::link::{self, Frame, ProgressReport};
use crate::os::random_u64;
use ecast::{Operation, OperationResult, Query, Sender, SenderEvent, SenderSettings};
use placement::ecast::Message as Routing;
use placement::{ConfigMessage, Configuration, ProcessId, Refusal};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use vr::{ClientId, Message, Request, RequestKind, RequestNumber};

/// An unanswered router request is resent this often (to the next router every second time).
const RETRY: Duration = Duration::from_millis(200);

/// What became of a submitted configuration message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// Sequenced: the configuration moved to the next version at that point of the order.
    Accepted { destinations: Vec<ProcessId> },
    /// `apply` refused it at its point of the order; nothing changed.
    Refused(Refusal),
}

pub struct RouterClient {
    config: ClusterConfig,
    address: SocketAddr,
    frames: mpsc::Receiver<Frame>,
    client: ClientId,
    request_next: RequestNumber,
    target: usize,
    sender: Sender,
}

impl RouterClient {
    /// Listens on an ephemeral port of the routers' interface for answers.
    pub async fn start(config: ClusterConfig) -> Result<RouterClient, String> {
        // Requests without the cluster secret's tags are dropped: the secret is the admin's
        // credential towards the routers and storage processes.
        crate::security::authenticate_peers(&config.security, &config.data_dir)?;
        let ip = config
            .routers
            .first()
            .ok_or("the cluster has no router")?
            .address
            .ip();
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .await
            .map_err(|error| format!("cannot listen on {ip}: {error}"))?;
        let address = listener
            .local_addr()
            .map_err(|error| format!("no local address: {error}"))?;
        let (frames, receiver) = mpsc::channel(4_096);
        tokio::spawn(link::accept(listener, frames));
        // A super process's sender id: never a storage id, never a gateway of one.
        let id = super::gateway_sender(ProcessId(0), random_u64()).process_id();
        let target = (random_u64() % config.routers.len() as u64) as usize;
        Ok(RouterClient {
            config,
            address,
            frames: receiver,
            client: ClientId(random_u64()),
            request_next: RequestNumber(1),
            target,
            sender: Sender::new(id, SenderSettings::default()),
        })
    }

    /// One VR request, retried (following `NotPrimary`, rotating routers) until answered or
    /// `deadline` passes.
    async fn call(
        &mut self,
        kind: RequestKind,
        operation: Operation,
        deadline: Duration,
    ) -> Result<OperationResult, String> {
        let request = Request {
            client: self.client,
            request: self.request_next,
            kind,
            operation: operation.encode(),
        };
        self.request_next = RequestNumber(self.request_next.0 + 1);
        let started = Instant::now();
        let mut attempts = 0u32;
        loop {
            if started.elapsed() >= deadline {
                return Err(format!(
                    "the router group did not answer within {deadline:?}"
                ));
            }
            let router = self.config.routers[self.target].address;
            link::send_once(
                router,
                Frame::AdminRequest {
                    reply_to: self.address,
                    request: request.clone(),
                },
            );
            let wait = tokio::time::sleep(RETRY);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    _ = &mut wait => break,
                    frame = self.frames.recv() => match frame {
                        Some(Frame::Reply { message: Message::Reply(reply) })
                            if reply.request == request.request =>
                        {
                            return Ok(OperationResult::decode(&reply.result));
                        }
                        Some(Frame::Reply { message: Message::NotPrimary { view, request: number, .. } })
                            if number == request.request =>
                        {
                            self.target = (view.0 % self.config.routers.len() as u64) as usize;
                            break;
                        }
                        Some(_) => {}
                        None => return Err("the answer listener stopped".into()),
                    },
                }
            }
            attempts += 1;
            if attempts.is_multiple_of(2) {
                self.target = (self.target + 1) % self.config.routers.len();
            }
        }
    }

    /// The router group's current configuration (VR read path: only a current primary
    /// answers).
    pub async fn configuration(&mut self) -> Result<Configuration, String> {
        let operation = Operation::Query(Query::Configuration);
        match self
            .call(RequestKind::Read, operation, Duration::from_secs(10))
            .await?
        {
            OperationResult::Configuration(configuration) => Ok(configuration),
            other => Err(format!(
                "unexpected answer to a configuration query: {other:?}"
            )),
        }
    }

    /// The grouped routers' storage-process configuration and groups (`Query::Grouping`;
    /// `None` when the routers route to storage processes or fixed groups): what a super
    /// process of `vr` partitions above replication 1 plans against.
    pub async fn grouping(&mut self) -> Result<Option<ecast::Grouping>, String> {
        let operation = Operation::Query(Query::Grouping);
        match self
            .call(RequestKind::Read, operation, Duration::from_secs(10))
            .await?
        {
            OperationResult::Grouping(grouping) => Ok(grouping),
            other => Err(format!("unexpected answer to a grouping query: {other:?}")),
        }
    }

    /// Submits one configuration message through this client's sender and waits for its
    /// outcome at its point of the global order.
    pub async fn submit(&mut self, message: ConfigMessage) -> Result<Submitted, String> {
        let routing = Routing::Config {
            sender: self.sender.id(),
            message: message.clone(),
        };
        let sequence = self
            .sender
            .submit(message.based_on, routing, Vec::new())
            .map_err(|error| format!("cannot submit: {error:?}"))?;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            let Some(batch) = self.sender.batch() else {
                // Submitted and not settled: ask again after the sender's resubmit interval.
                self.sender.tick();
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            };
            let result = self
                .call(RequestKind::Write, batch, Duration::from_secs(10))
                .await?;
            let mut events = Vec::new();
            self.sender.on_result(&result, &mut events);
            for event in events {
                match event {
                    SenderEvent::Sequenced {
                        sequence: settled,
                        destinations,
                        ..
                    } if settled == sequence => {
                        return Ok(Submitted::Accepted { destinations });
                    }
                    SenderEvent::Refused {
                        sequence: settled,
                        refusal,
                    } if settled == sequence => return Ok(Submitted::Refused(refusal)),
                    SenderEvent::Lost {
                        sequence: settled,
                        reason,
                    } if settled == sequence => {
                        return Err(format!("the routers lost the message: {reason}"))
                    }
                    _ => {}
                }
            }
        }
        Err("the configuration message was not sequenced within 20 s".into())
    }

    /// Asks every storage process in `processes` for its progress; returns the answers that
    /// arrive within `wait`.
    pub async fn progress(
        &mut self,
        processes: &[ProcessId],
        wait: Duration,
    ) -> BTreeMap<ProcessId, ProgressReport> {
        let nonce = random_u64();
        let mut expected = 0;
        for process in processes {
            if let Some(storage) = self.config.storage(*process) {
                expected += 1;
                link::send_once(
                    storage.address,
                    Frame::ProgressQuery {
                        reply_to: self.address,
                        nonce,
                    },
                );
            }
        }
        let mut reports = BTreeMap::new();
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        while reports.len() < expected {
            tokio::select! {
                _ = &mut deadline => break,
                frame = self.frames.recv() => match frame {
                    Some(Frame::Progress { nonce: answered, report }) if answered == nonce => {
                        if processes.contains(&report.process) {
                            reports.insert(report.process, *report);
                        }
                    }
                    Some(_) => {}
                    None => break,
                },
            }
        }
        reports
    }
}
