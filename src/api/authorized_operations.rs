//! The `*_authorized_operations` fields of Metadata, DescribeCluster, DescribeGroups,
//! ConsumerGroupDescribe and DescribeTopicPartitions (KIP-430). With no authorizer, Kafka
//! answers every operation its ACL model supports on the resource type, as a bit field of
//! AclOperation codes; a field not asked for is `i32::MIN`.

/// AclOperation codes (org.apache.kafka.common.acl.AclOperation).
const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

/// The value of a field that was not asked for.
pub const NOT_ASKED: i32 = i32::MIN;

const fn bits(operations: &[u8]) -> i32 {
    let mut field = 0;
    let mut i = 0;
    while i < operations.len() {
        field |= 1 << operations[i];
        i += 1;
    }
    field
}

/// Every operation on a topic.
pub const TOPIC: i32 = bits(&[
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);

/// Every operation on the cluster.
pub const CLUSTER: i32 = bits(&[
    CREATE,
    ALTER,
    DESCRIBE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
]);

/// Every operation on a group (its configs too, KIP-848).
pub const GROUP: i32 = bits(&[READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_are_the_ones_apache_kafka_4_1_answers_without_an_authorizer() {
        // Read from Kafka 4.1.1 here (Metadata v8-12, DescribeCluster v1, DescribeGroups v5).
        assert_eq!(TOPIC, 3576);
        assert_eq!(CLUSTER, 8096);
        assert_eq!(GROUP, 3400);
        assert_eq!(NOT_ASKED, -2_147_483_648);
    }
}
