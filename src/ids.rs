//! The numbers a partition's replication is made of, each as its own type: an [`Offset`]
//! in a log, a partition's [`LeaderEpoch`], a [`BrokerId`], a [`ProducerId`] and its
//! [`ProducerEpoch`]. All are the integers Kafka's protocol and files carry (`i64`, `i32`,
//! `i16`), so the wire and the disk convert with the public field; what the types stop is
//! an epoch passed where an offset was meant, or a broker id where an epoch was. `log/`
//! and `replica/` take and return them on their public signatures (issue 17).

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

macro_rules! number_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<$inner> for $name {
            fn from(value: $inner) -> Self {
                Self(value)
            }
        }

        impl From<$name> for $inner {
            fn from(value: $name) -> Self {
                value.0
            }
        }
    };
}

number_type! {
    /// The position of a record in a partition's log (Kafka's `int64` offsets). The
    /// difference of two offsets is a count of records, an `i64`; an offset plus a count is
    /// an offset.
    Offset(i64)
}

number_type! {
    /// The epoch of a partition's leadership: raised by the controller at each leader
    /// change, stamped on every batch the leader appends (Kafka's `int32` leader epoch).
    LeaderEpoch(i32)
}

number_type! {
    /// A broker's (or controller's) `node.id` (Kafka's `int32` broker id).
    BrokerId(i32)
}

number_type! {
    /// An idempotent or transactional producer's id (Kafka's `int64` producer id).
    ProducerId(i64)
}

number_type! {
    /// A producer id's epoch, raised when a transactional producer is fenced or its
    /// transaction aborted on timeout (Kafka's `int16` producer epoch).
    ProducerEpoch(i16)
}

impl Offset {
    /// No offset: Kafka's `-1` where an offset is absent (an empty epoch's end, an unknown
    /// position).
    pub const UNKNOWN: Offset = Offset(-1);

    /// The offset right after this one.
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl Add<i64> for Offset {
    type Output = Offset;
    fn add(self, records: i64) -> Offset {
        Offset(self.0 + records)
    }
}

impl AddAssign<i64> for Offset {
    fn add_assign(&mut self, records: i64) {
        self.0 += records;
    }
}

impl Sub<i64> for Offset {
    type Output = Offset;
    fn sub(self, records: i64) -> Offset {
        Offset(self.0 - records)
    }
}

impl Sub for Offset {
    type Output = i64;
    /// The number of records from `earlier` up to `self`.
    fn sub(self, earlier: Offset) -> i64 {
        self.0 - earlier.0
    }
}

impl LeaderEpoch {
    /// No epoch: Kafka's `-1` (a batch from before leader epochs, a request that names
    /// none, an empty epoch cache).
    pub const UNKNOWN: LeaderEpoch = LeaderEpoch(-1);
}

impl BrokerId {
    /// No broker: Kafka's `-1` (a partition without a leader).
    pub const NONE: BrokerId = BrokerId(-1);
}

impl ProducerId {
    /// No producer: Kafka's `-1` (a batch from a plain, non-idempotent producer).
    pub const NONE: ProducerId = ProducerId(-1);
}

impl ProducerEpoch {
    /// No epoch: Kafka's `-1`.
    pub const NONE: ProducerEpoch = ProducerEpoch(-1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_records_between_them() {
        let start = Offset(10);
        assert_eq!(start + 5, Offset(15));
        assert_eq!(Offset(15) - start, 5);
        assert_eq!(start.next(), Offset(11));
        assert_eq!(Offset(15) - 5, start);
        assert!(start < start.next());
    }

    #[test]
    fn numbers_print_as_kafka_prints_them() {
        assert_eq!(Offset(42).to_string(), "42");
        assert_eq!(LeaderEpoch::UNKNOWN.to_string(), "-1");
        assert_eq!(BrokerId(3).to_string(), "3");
        assert_eq!(format!("{:?}", BrokerId(3)), "BrokerId(3)");
    }
}
