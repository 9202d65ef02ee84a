//! Writing metadata and applying what the quorum committed: `change_metadata` decides a change
//! against the committed image under the writers' lock, proposes it through the quorum and
//! answers once it is committed and applied here; `publish` is the one place a new image
//! (committed records or a snapshot) takes effect on this node.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use uuid::Uuid;

use crate::broker::drivers::quorum::handle::ProposeError;
use crate::broker::drivers::reconcile::plan::{effects, Delta, Effect};
use crate::broker::errors::CommitError;
use crate::broker::handlers::inter_node::forward;
use crate::broker::shared::Broker;
use crate::controller::{Controller, ControllerError, MetadataImage, MetadataRecord};

/// How long a metadata change waits for the quorum's commit before REQUEST_TIMED_OUT.
const METADATA_COMMIT_TIMEOUT_MS: u64 = 10_000;

impl Broker {
    /// Decides a metadata change against the current image and makes it durable, all under the
    /// metadata lock (so two requests cannot both pass validation against the same image), then
    /// publishes the new image and applies the change to local partitions. With
    /// `validate_only`, only decides.
    pub(super) async fn change_metadata<T>(
        &self,
        validate_only: bool,
        decide: impl FnOnce(
            &Controller,
            &MetadataImage,
        ) -> Result<(Vec<MetadataRecord>, T), ControllerError>,
    ) -> Result<T, CommitError> {
        self.change_metadata_until(None, validate_only, decide)
            .await
    }

    /// [`Broker::change_metadata`] for a client's request with its `deadline` (monotonic,
    /// `RequestContext::deadline`): it waits for the metadata lock at most until then, and once
    /// the deadline has passed decides nothing (REQUEST_TIMED_OUT), as Kafka's controller drops
    /// an event past its deadline. A request queued behind a stuck commit (a controller cut off
    /// from its quorum holds the lock up to the commit bound) must not be carried out seconds
    /// after its client gave up: the sweep caught one re-creating a topic deleted meanwhile.
    pub(super) async fn change_metadata_until<T>(
        &self,
        deadline: Option<Duration>,
        validate_only: bool,
        decide: impl FnOnce(
            &Controller,
            &MetadataImage,
        ) -> Result<(Vec<MetadataRecord>, T), ControllerError>,
    ) -> Result<T, CommitError> {
        let _writer = match deadline {
            None => self.metadata.lock().await,
            Some(deadline) => {
                let wait = deadline.saturating_sub(self.io.clock.monotonic());
                let locked = self.io.timeout(wait, self.metadata.lock()).await;
                match locked {
                    Some(guard) if self.io.clock.monotonic() < deadline => guard,
                    _ => return Err(CommitError::Timeout),
                }
            }
        };
        self.confirm_leadership().await?;
        self.commit_through_quorum(validate_only, decide).await
    }

    /// `change_metadata` (the caller holds the metadata lock, so writes are serial): on the
    /// active controller only, decide against the committed image, propose, and answer once
    /// the quorum has committed and this node applied the records.
    pub(super) async fn commit_through_quorum<T>(
        &self,
        validate_only: bool,
        decide: impl FnOnce(
            &Controller,
            &MetadataImage,
        ) -> Result<(Vec<MetadataRecord>, T), ControllerError>,
    ) -> Result<T, CommitError> {
        let quorum = &self.quorum;
        if !quorum.is_active() {
            return Err(CommitError::NotController);
        }
        let image = self.image();
        let (records, out) = decide(&self.controller, &image).map_err(CommitError::Rejected)?;
        if validate_only || records.is_empty() {
            return Ok(out);
        }
        self.propose_committed(&records).await?;
        Ok(out)
    }

    /// Proposes `records` through the quorum and waits (bounded) until they are committed and
    /// applied here; a commit also confirms this node's leadership as of the proposal.
    async fn propose_committed(&self, records: &[MetadataRecord]) -> Result<(), CommitError> {
        let quorum = &self.quorum;
        self.check_online().map_err(CommitError::Storage)?;
        let values = records
            .iter()
            .map(|r| serde_json::to_vec(r).map(Bytes::from))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CommitError::Storage(io::Error::other(e)))?;
        let limit = Duration::from_millis(METADATA_COMMIT_TIMEOUT_MS);
        let (epoch, proposed_at) = (quorum.leader_epoch(), self.monotonic_ms());
        match self.io.timeout(limit, quorum.propose(values)).await {
            Some(Ok(_)) => {
                if let Some(epoch) = epoch {
                    quorum.note_confirmed(epoch, proposed_at);
                }
                Ok(())
            }
            Some(Err(ProposeError::NotController)) => Err(CommitError::NotController),
            Some(Err(ProposeError::Stopped)) => Err(CommitError::Storage(io::Error::other(
                "the metadata quorum stopped",
            ))),
            None => Err(CommitError::Timeout),
        }
    }

    /// Before the active controller decides a request against its image (`change_metadata`;
    /// not the bootstrap records, which must be the log's first write, nor the active
    /// controller core's own writes): proof that it still leads.
    /// A leader cut off from its voters for less than its check-quorum window never resigns,
    /// and after the cut heals it may still call itself leader of an epoch the others left:
    /// its image lacks what the new leader committed, and a decision that needs no commit (a
    /// refusal, a validation) would be answered from it — UNKNOWN_TOPIC_OR_PARTITION for a
    /// topic created meanwhile. A proposal committed within the last half fetch timeout proves
    /// leadership (a new leader needs a majority that has not heard from this one for a whole
    /// fetch timeout); without one, a NoOp record (Kafka's NoOpRecord, KIP-835) is committed
    /// first. A deposed leader cannot commit it: the request gets NOT_CONTROLLER or times out,
    /// and the client retries elsewhere. Stale fetches delivered after a heal cannot fake
    /// this, as they can fake check-quorum: they acknowledge no new offset.
    async fn confirm_leadership(&self) -> Result<(), CommitError> {
        if !self.quorum.is_active() {
            return Err(CommitError::NotController);
        }
        let lease = self.config.quorum_fetch_timeout_ms / 2;
        let since = self.monotonic_ms().saturating_sub(lease);
        if self.quorum.leadership_confirmed_since(since) {
            return Ok(());
        }
        self.propose_committed(&[MetadataRecord::NoOp]).await
    }

    fn monotonic_ms(&self) -> u64 {
        self.io.clock.monotonic().as_millis() as u64
    }

    /// Committed records from the quorum, in order (the driver calls this), published as the
    /// new image. A record this version cannot read is logged and skipped, never guessed at.
    pub(crate) async fn apply_committed(&self, values: &[(u64, Bytes)]) {
        if values.is_empty() {
            return;
        }
        let mut image = (*self.image()).clone();
        let mut parsed = Vec::with_capacity(values.len());
        for (offset, value) in values {
            self.committed.push(*offset, value.clone());
            match serde_json::from_slice::<MetadataRecord>(value) {
                Ok(record) => {
                    image.apply(*offset as i64, &record);
                    parsed.push(record);
                }
                Err(e) => {
                    tracing::error!(offset, error = %e, "unreadable committed metadata record skipped")
                }
            }
        }
        self.publish(Arc::new(image), Delta::Records(&parsed)).await;
    }

    /// Replaces the image with a snapshot's (loaded at start, or fetched from the quorum
    /// leader): everything below `end` is in it.
    pub(crate) async fn install_snapshot(&self, image: Arc<MetadataImage>, end: u64) {
        self.committed.advance_to(end);
        self.publish(image, Delta::Snapshot).await;
    }

    /// The one place a new image takes effect here: readers see it, the local partitions are
    /// reconciled with it (`reconcile::plan`, retried by the background loop if a pass fails:
    /// the change itself is committed), then the other local effects of `delta` are carried
    /// out (`reconcile::plan::effects`: the offsets topic, topic configs).
    pub(super) async fn publish(&self, new: Arc<MetadataImage>, delta: Delta<'_>) {
        *self.image.write().unwrap() = new.clone();
        {
            // Serialised with the background loop's retries.
            let _gate = self.reconcile_gate.lock().await;
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, "reconciliation after a new image failed; will retry");
            }
        }
        for effect in effects(&new, self.config.node_id, &delta) {
            match effect {
                Effect::OffsetsTopic { partitions } => self.offsets_topic_created(partitions),
                Effect::ReconfigureTopic(name) => {
                    if let Some(config) = self.topic_config(&name) {
                        for handle in self.topic_partitions(&name) {
                            handle.lock().set_config(config.clone());
                        }
                    }
                }
                Effect::ReconfigureAll => self.reconfigure_all_topics(),
            }
        }
        self.note_client_readiness();
    }

    /// Gives every open partition its topic's current config (after the defaults changed).
    pub(super) fn reconfigure_all_topics(&self) {
        let image = self.image();
        for topic in image.topics() {
            if let Some(config) = self.topic_config(&topic.name) {
                for handle in self.topic_partitions(&topic.name) {
                    handle.lock().set_config(config.clone());
                }
            }
        }
    }

    /// Creates topics that a Metadata request named and auto-creation allows.
    pub(super) async fn auto_create(
        &self,
        names: &[String],
    ) -> Vec<(String, Result<(), CommitError>)> {
        let mut results = Vec::new();
        for name in names {
            let new = crate::controller::NewTopic {
                name: name.clone(),
                partitions: -1,
                replication_factor: -1,
                ..Default::default()
            };
            results.push((name.clone(), forward::create_topic(self, new, false).await));
        }
        results
    }

    pub(super) async fn create_topic(
        &self,
        new: crate::controller::NewTopic,
        validate_only: bool,
    ) -> Result<(), CommitError> {
        self.create_topic_until(None, new, validate_only, |_| Ok(()))
            .await
    }

    /// [`Broker::create_topic`] for a client's request with its deadline
    /// ([`Broker::change_metadata_until`]); `charge` sees the records decided (validated)
    /// and may still refuse them (the controller mutation quota).
    pub(super) async fn create_topic_until(
        &self,
        deadline: Option<Duration>,
        new: crate::controller::NewTopic,
        validate_only: bool,
        charge: impl FnOnce(&[MetadataRecord]) -> Result<(), ControllerError>,
    ) -> Result<(), CommitError> {
        let id = Uuid::from_u64_pair(self.io.rng.next_u64(), self.io.rng.next_u64());
        let entropy = self.io.rng.next_u64();
        self.change_metadata_until(deadline, validate_only, |controller, image| {
            let records = controller.create_topic(image, &new, id, entropy)?;
            charge(&records)?;
            Ok((records, ()))
        })
        .await
    }
}
