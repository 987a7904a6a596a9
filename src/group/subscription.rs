//! Reads the topics out of a consumer's subscription (the metadata a member of protocol
//! type "consumer" sends in JoinGroup), for OffsetDelete's check that no member is still
//! subscribed. The first two bytes are the subscription's version.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;

/// The newest subscription version decoded here; newer ones are read as this one, which
/// Kafka's compatibility rules for this schema allow (fields are only appended).
const SUBSCRIPTION_VERSION_MAX: i16 = 3;

/// The subscribed topics, or `None` when the metadata is not a consumer subscription.
pub fn topics(metadata: &Bytes) -> Option<Vec<String>> {
    let mut buf = metadata.clone();
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16().clamp(0, SUBSCRIPTION_VERSION_MAX);
    let subscription = ConsumerProtocolSubscription::decode(&mut buf, version).ok()?;
    Some(subscription.topics.iter().map(|t| t.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn topics_are_read_from_a_java_style_subscription() {
        let subscription = ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("orders")]);
        let mut buf = BytesMut::new();
        buf.put_i16(1);
        subscription.encode(&mut buf, 1).expect("encode");
        assert_eq!(topics(&buf.freeze()), Some(vec!["orders".to_string()]));
    }

    #[test]
    fn garbage_is_not_a_subscription() {
        assert_eq!(topics(&Bytes::from_static(&[0, 1, 0xff])), None);
    }
}
