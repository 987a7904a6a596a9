//! Kafka wire types built from plain strings, for every layer that speaks the protocol (the
//! request handlers, the replica fetcher).

/// A wire topic name from a string.
pub fn topic_name(name: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_string(
        name.to_string(),
    ))
}

/// A wire string from a string.
pub fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_string())
}
