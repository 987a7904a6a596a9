//! The APIs highwater implements and the version range of each: the single table that
//! ApiVersions advertises, that dispatch checks, and that the README's table is made from.
//!
//! Ranges follow what Apache Kafka 4.x advertises, bounded by what is fully implemented
//! here (a client always picks the highest common version, so an advertised version must
//! work). Produce is advertised from v0 as Kafka 4 does, so that librdkafka before 2.11.1,
//! which gates features on single versions, enables idempotence and zstd; v0-2 requests are
//! refused as in Kafka 4 (KAFKA-18659).

use kafka_protocol::messages::ApiKey;

/// One supported API: key, advertised min and max, and the lowest version actually served.
#[derive(Debug, Clone, Copy)]
pub struct SupportedApi {
    pub key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    pub min_served: i16,
}

const fn api(key: ApiKey, min_version: i16, max_version: i16) -> SupportedApi {
    SupportedApi {
        key,
        min_version,
        max_version,
        min_served: min_version,
    }
}

/// Every API served, in API key order.
pub const SUPPORTED_APIS: &[SupportedApi] = &[
    SupportedApi {
        key: ApiKey::Produce,
        min_version: 0,
        max_version: 13,
        min_served: 3,
    },
    api(ApiKey::Fetch, 4, 18),
    api(ApiKey::ListOffsets, 1, 10),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 2, 9),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::AlterReplicaLogDirs, 1, 2),
    api(ApiKey::DescribeLogDirs, 1, 4),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::CreateDelegationToken, 1, 3),
    api(ApiKey::RenewDelegationToken, 1, 2),
    api(ApiKey::ExpireDelegationToken, 1, 2),
    api(ApiKey::DescribeDelegationToken, 1, 3),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::ElectLeaders, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::AlterPartitionReassignments, 0, 1),
    api(ApiKey::ListPartitionReassignments, 0, 0),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    api(ApiKey::AddPartitionsToTxn, 0, 5),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 5),
    api(ApiKey::WriteTxnMarkers, 1, 1),
    api(ApiKey::TxnOffsetCommit, 0, 5),
    api(ApiKey::DescribeQuorum, 0, 2),
    api(ApiKey::UpdateFeatures, 0, 2),
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 1),
    api(ApiKey::ListConfigResources, 0, 1),
    api(ApiKey::DescribeTopicPartitions, 0, 0),
];

/// The APIs served to Kafka clients on the controller listener (admin tools run with
/// `--bootstrap-controller`): administration only, as Kafka's ControllerApis (no produce,
/// fetch or groups).
pub const CONTROLLER_APIS: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::CreatePartitions,
    ApiKey::ElectLeaders,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::DescribeQuorum,
    ApiKey::UpdateFeatures,
    ApiKey::DescribeCluster,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
];

/// Whether `key` is served on a listener of this kind (`controller`: the controller
/// listener).
pub fn on_listener(key: ApiKey, controller: bool) -> bool {
    !controller || CONTROLLER_APIS.contains(&key)
}

/// The entry for `key`, if highwater serves it.
pub fn supported(key: ApiKey) -> Option<&'static SupportedApi> {
    SUPPORTED_APIS.iter().find(|api| api.key == key)
}

/// Whether `version` of `key` is served.
pub fn is_served(key: ApiKey, version: i16) -> bool {
    supported(key).is_some_and(|api| version >= api.min_served && version <= api.max_version)
}

/// The README's table of supported APIs, generated from [`SUPPORTED_APIS`].
pub fn markdown_table() -> String {
    let mut table = String::from("| API | key | versions |\n|---|---|---|\n");
    for api in SUPPORTED_APIS {
        let versions = if api.min_served == api.min_version {
            format!("{}–{}", api.min_version, api.max_version)
        } else {
            format!(
                "{}–{} (advertised from {})",
                api.min_served, api.max_version, api.min_version
            )
        };
        table.push_str(&format!(
            "| {:?} | {} | {} |\n",
            api.key, api.key as i16, versions
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_version_is_decodable_by_the_codec() {
        for api in SUPPORTED_APIS {
            let codec = api.key.valid_versions();
            assert!(
                api.min_served >= codec.min,
                "{:?} min {}",
                api.key,
                api.min_served
            );
            assert!(
                api.max_version <= codec.max,
                "{:?} max {}",
                api.key,
                api.max_version
            );
        }
    }

    #[test]
    fn readme_lists_the_supported_apis() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
            .expect("README.md");
        assert!(
            readme.contains(&markdown_table()),
            "README.md's API table is out of date; replace it with:\n{}",
            markdown_table()
        );
    }
}
