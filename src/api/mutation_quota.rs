//! The controller mutation quota (KIP-599) as one CreateTopics, CreatePartitions or
//! DeleteTopics request meets it, as Kafka's ControllerApis applies it: each topic takes as
//! many tokens as partitions it creates or deletes, once it has passed every other check.
//! From the version a request learnt THROTTLING_QUOTA_EXCEEDED (the quota is strict), a
//! client already over its quota has each further topic refused with that error and its
//! back-off; older clients have the change made and are only throttled.

use std::sync::Arc;

use super::refusal::{AdminError, Refusal};
use super::{Broker, Request};
use crate::metadata::client_quotas::ClientQuotas;

/// One request's use of the controller mutation quota.
pub struct MutationQuota<'a> {
    broker: &'a Broker,
    request: &'a Request,
    quotas: Arc<ClientQuotas>,
    strict: bool,
}

impl<'a> MutationQuota<'a> {
    /// The quota of `request`, strict from version `strict_since`.
    pub fn new(broker: &'a Broker, request: &'a Request, strict_since: i16) -> MutationQuota<'a> {
        MutationQuota {
            broker,
            request,
            quotas: Arc::clone(&broker.image().client_quotas),
            strict: request.version() >= strict_since,
        }
    }

    /// Refuses a change of `topic` while the client is over its quota (strict versions),
    /// raising the request's throttle to the back-off.
    pub fn check(&self, topic: &str) -> Result<(), AdminError> {
        if !self.strict {
            return Ok(());
        }
        let client = self.request.quota_client();
        let wait_ms = self
            .broker
            .quotas
            .controller_mutation
            .exceeded_ms(&self.quotas, client);
        if wait_ms == 0 {
            return Ok(());
        }
        self.request.throttle.raise(wait_ms);
        tracing::debug!(client = %self.request.client, client_id = client.client_id, user = client.user, topic, wait_ms, "controller mutation quota exceeded; topic change refused");
        Err(AdminError::Refused(Refusal::ThrottlingQuotaExceeded))
    }

    /// Counts `partitions` created or deleted; an older client over its quota is throttled.
    pub fn record(&self, partitions: usize) {
        let client = self.request.quota_client();
        let wait_ms =
            self.broker
                .quotas
                .controller_mutation
                .take(&self.quotas, client, partitions as f64);
        if !self.strict {
            self.request.throttle.raise(wait_ms);
        }
    }
}
