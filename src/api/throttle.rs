//! The back-off a request earned under the client quotas (`crate::quota`), carried from
//! where it is decided — before the handler for the request quota, in Produce and Fetch
//! for the byte rates — into the response's `throttle_time_ms` and to the connection,
//! which reads nothing more from that client for as long (Kafka mutes the channel).

use std::sync::atomic::{AtomicU32, Ordering};

/// A request's throttle time in ms: the largest any quota asked for.
#[derive(Debug, Default)]
pub struct Throttle(AtomicU32);

impl Throttle {
    /// Raises the throttle to `ms` if it is lower.
    pub fn raise(&self, ms: u64) {
        let ms = u32::try_from(ms).unwrap_or(u32::MAX);
        self.0.fetch_max(ms, Ordering::Relaxed);
    }

    /// The throttle time so far.
    pub fn ms(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A response that tells the client its throttle time.
pub trait ThrottleTime {
    fn set_throttle_time_ms(&mut self, ms: i32);
}

/// Responses with a `throttle_time_ms` field (in the versions that have it).
macro_rules! throttle_time_field {
    ($($response:ident),* $(,)?) => {
        $(impl ThrottleTime for kafka_protocol::messages::$response {
            fn set_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = ms;
            }
        })*
    };
}

/// Responses without one: the throttle is only applied by not reading.
macro_rules! no_throttle_time_field {
    ($($response:ident),* $(,)?) => {
        $(impl ThrottleTime for kafka_protocol::messages::$response {
            fn set_throttle_time_ms(&mut self, _ms: i32) {}
        })*
    };
}

throttle_time_field!(
    ProduceResponse,
    FetchResponse,
    ListOffsetsResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    FindCoordinatorResponse,
    JoinGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
    ApiVersionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DeleteRecordsResponse,
    InitProducerIdResponse,
    OffsetForLeaderEpochResponse,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    TxnOffsetCommitResponse,
    DescribeAclsResponse,
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeConfigsResponse,
    AlterConfigsResponse,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsResponse,
    CreatePartitionsResponse,
    DeleteGroupsResponse,
    ElectLeadersResponse,
    IncrementalAlterConfigsResponse,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    OffsetDeleteResponse,
    DescribeClientQuotasResponse,
    AlterClientQuotasResponse,
    DescribeUserScramCredentialsResponse,
    AlterUserScramCredentialsResponse,
    CreateDelegationTokenResponse,
    RenewDelegationTokenResponse,
    ExpireDelegationTokenResponse,
    DescribeDelegationTokenResponse,
    UpdateFeaturesResponse,
    DescribeClusterResponse,
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeResponse,
    DescribeTopicPartitionsResponse,
    ListConfigResourcesResponse,
    BrokerRegistrationResponse,
    BrokerHeartbeatResponse,
);

no_throttle_time_field!(
    SaslHandshakeResponse,
    SaslAuthenticateResponse,
    WriteTxnMarkersResponse,
    DescribeQuorumResponse,
);

/// A future timed while it runs: the time spent in its polls, which is what handling a
/// request costs this broker (waiting for data or replication costs nothing, as Kafka's
/// request quota counts request-thread time, not time in purgatory).
pub struct PollTimed<F> {
    inner: std::pin::Pin<Box<F>>,
    spent: std::time::Duration,
}

impl<F> std::fmt::Debug for PollTimed<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollTimed")
            .field("spent", &self.spent)
            .finish()
    }
}

impl<F: std::future::Future> PollTimed<F> {
    pub fn new(inner: F) -> Self {
        PollTimed {
            inner: Box::pin(inner),
            spent: std::time::Duration::ZERO,
        }
    }
}

impl<F: std::future::Future> std::future::Future for PollTimed<F> {
    type Output = (F::Output, std::time::Duration);

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let started = std::time::Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        self.spent += started.elapsed();
        let spent = self.spent;
        polled.map(|output| (output, spent))
    }
}
