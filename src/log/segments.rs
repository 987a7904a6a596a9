//! A log's segments as a type that cannot be empty: the sealed ones, oldest first, and
//! the active one that appends go to. Rolling, truncating, retention and the cleaner's
//! swap change the list only through it, so "a log always has an active segment" holds
//! by construction instead of by an `expect` at every use.

use super::error::LogError;
use super::segment::Segment;

/// The segments of one log: `sealed` (oldest first) then `active`. Each ends where the
/// next begins (checked by `Log::check_invariants`).
#[derive(Debug)]
pub struct Segments {
    sealed: Vec<Segment>,
    active: Segment,
}

/// Every segment, oldest first.
pub type Iter<'a> = std::iter::Chain<std::slice::Iter<'a, Segment>, std::iter::Once<&'a Segment>>;

impl Segments {
    /// `segments` (oldest first) with the last one active, or only the one `empty` makes
    /// when there are none.
    pub fn new(
        mut segments: Vec<Segment>,
        empty: impl FnOnce() -> Result<Segment, LogError>,
    ) -> Result<Segments, LogError> {
        let active = match segments.pop() {
            Some(active) => active,
            None => empty()?,
        };
        Ok(Segments {
            sealed: segments,
            active,
        })
    }

    /// The segment appends go to.
    pub fn active(&self) -> &Segment {
        &self.active
    }

    /// The segment appends go to, to append to or seal.
    pub fn active_mut(&mut self) -> &mut Segment {
        &mut self.active
    }

    /// The sealed segments, oldest first (what the cleaner and retention may remove).
    pub fn sealed(&self) -> &[Segment] {
        &self.sealed
    }

    /// The oldest segment (the active one when none is sealed).
    pub fn first(&self) -> &Segment {
        self.sealed.first().unwrap_or(&self.active)
    }

    /// How many segments there are (at least one).
    pub fn len(&self) -> usize {
        self.sealed.len() + 1
    }

    /// Always false: a log has its active segment.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Every segment, oldest first.
    pub fn iter(&self) -> Iter<'_> {
        self.sealed.iter().chain(std::iter::once(&self.active))
    }

    /// The segment `n` (0 the oldest), if there are that many.
    pub fn get(&self, n: usize) -> Option<&Segment> {
        match n.cmp(&self.sealed.len()) {
            std::cmp::Ordering::Less => self.sealed.get(n),
            std::cmp::Ordering::Equal => Some(&self.active),
            std::cmp::Ordering::Greater => None,
        }
    }

    /// How many segments start at or before `offset` (the segment holding `offset` is
    /// the one before that count).
    pub fn starting_at_or_before(&self, offset: i64) -> usize {
        match self.active.base_offset() <= offset {
            true => self.len(),
            false => self.sealed.partition_point(|s| s.base_offset() <= offset),
        }
    }

    /// The segment whose offsets include `offset` (the last starting at or before it);
    /// `None` below the first segment.
    pub fn holding(&self, offset: i64) -> Option<&Segment> {
        self.starting_at_or_before(offset)
            .checked_sub(1)
            .and_then(|n| self.get(n))
    }

    /// Makes `next` the active segment and the former active one (which the caller has
    /// sealed) the newest sealed segment.
    pub fn roll(&mut self, next: Segment) {
        let sealed = std::mem::replace(&mut self.active, next);
        self.sealed.push(sealed);
    }

    /// Makes segment `n` (0 the oldest) the active one and removes every later segment,
    /// which it returns (oldest first) for the caller to delete; nothing when `n` is the
    /// active segment already or out of range.
    pub fn keep_through(&mut self, n: usize) -> Vec<Segment> {
        if n >= self.sealed.len() {
            return Vec::new();
        }
        let mut later = self.sealed.split_off(n).into_iter();
        let Some(active) = later.next() else {
            return Vec::new();
        };
        let former = std::mem::replace(&mut self.active, active);
        later.chain(std::iter::once(former)).collect()
    }

    /// Replaces the active segment by `replacement` (a rewritten copy of it); returns the
    /// former one.
    pub fn replace_active(&mut self, replacement: Segment) -> Segment {
        std::mem::replace(&mut self.active, replacement)
    }

    /// Removes the `count` oldest sealed segments (at most every sealed one: the active
    /// segment stays) and returns them, oldest first.
    pub fn remove_oldest(&mut self, count: usize) -> Vec<Segment> {
        let count = count.min(self.sealed.len());
        self.sealed.drain(..count).collect()
    }

    /// Replaces the sealed segments `range` by `with` (a cleaned segment standing for
    /// them); `false`, changing nothing, when `range` is not wholly sealed.
    pub fn replace_sealed(&mut self, range: std::ops::Range<usize>, with: Segment) -> bool {
        if range.start >= range.end || range.end > self.sealed.len() {
            return false;
        }
        self.sealed.splice(range, [with]);
        true
    }
}

impl<'a> IntoIterator for &'a Segments {
    type Item = &'a Segment;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;
    use crate::log::segment::SegmentConfig;

    fn segment(dir: &std::path::Path, base: i64, records: i32) -> Segment {
        let config = SegmentConfig {
            segment_bytes: 1 << 16,
            segment_index_bytes: 4096,
            index_interval_bytes: 4096,
        };
        let mut segment = Segment::create(dir, base, config).expect("create");
        if records > 0 {
            let batch = encode_batch(records, 0, 0, 0);
            segment.append(&batch, base, 0, None).expect("append");
        }
        segment
    }

    /// Segments at 0, 10, 20 and the active one at 30, of ten records each.
    fn four(dir: &std::path::Path) -> Segments {
        let all = (0..4).map(|i| segment(dir, i * 10, 10)).collect();
        Segments::new(all, || unreachable!("four segments were given")).expect("segments")
    }

    fn bases<'a>(segments: impl IntoIterator<Item = &'a Segment>) -> Vec<i64> {
        segments.into_iter().map(Segment::base_offset).collect()
    }

    #[test]
    fn no_segment_at_all_gives_the_empty_one_as_active() {
        let dir = tempfile::tempdir().expect("tempdir");
        let segments = Segments::new(Vec::new(), || Ok(segment(dir.path(), 0, 0))).expect("new");
        assert_eq!(segments.len(), 1);
        assert!(segments.sealed().is_empty());
        assert_eq!(segments.first().base_offset(), 0);
        assert_eq!(bases(&segments), vec![0]);
    }

    #[test]
    fn the_segment_holding_an_offset_is_the_last_starting_at_or_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let segments = four(dir.path());
        let holding = |offset| segments.holding(offset).map(Segment::base_offset);
        assert_eq!(holding(0), Some(0));
        assert_eq!(holding(9), Some(0));
        assert_eq!(holding(10), Some(10));
        assert_eq!(holding(29), Some(20));
        assert_eq!(holding(30), Some(30));
        assert_eq!(holding(1_000), Some(30), "past the end: the active segment");
        let mut later = four(dir.path());
        later.remove_oldest(1);
        assert_eq!(later.holding(5).map(Segment::base_offset), None);
    }

    #[test]
    fn a_roll_seals_the_active_segment_behind_the_new_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut segments = four(dir.path());
        segments.roll(segment(dir.path(), 40, 0));
        assert_eq!(bases(segments.sealed()), vec![0, 10, 20, 30]);
        assert_eq!(segments.active().base_offset(), 40);
    }

    #[test]
    fn keeping_through_a_sealed_segment_makes_it_active_and_returns_the_later_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut segments = four(dir.path());
        let removed = segments.keep_through(1);
        assert_eq!(bases(&removed), vec![20, 30]);
        assert_eq!(bases(&segments), vec![0, 10]);
        assert_eq!(segments.active().base_offset(), 10);
        assert!(
            segments.keep_through(1).is_empty(),
            "already the active one"
        );
        assert!(segments.keep_through(7).is_empty(), "out of range");
        assert_eq!(bases(&segments.keep_through(0)), vec![10]);
        assert_eq!(segments.len(), 1);
    }

    #[test]
    fn retention_never_removes_the_active_segment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut segments = four(dir.path());
        assert_eq!(bases(&segments.remove_oldest(2)), vec![0, 10]);
        assert_eq!(bases(&segments.remove_oldest(9)), vec![20]);
        assert_eq!(bases(&segments), vec![30]);
        assert!(segments.remove_oldest(1).is_empty());
    }

    #[test]
    fn a_cleaned_segment_replaces_only_sealed_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut segments = four(dir.path());
        assert!(
            !segments.replace_sealed(2..4, segment(dir.path(), 20, 0)),
            "the active"
        );
        assert!(
            !segments.replace_sealed(1..1, segment(dir.path(), 10, 0)),
            "empty range"
        );
        assert_eq!(bases(&segments), vec![0, 10, 20, 30]);
        assert!(segments.replace_sealed(0..2, segment(dir.path(), 0, 0)));
        assert_eq!(bases(&segments), vec![0, 20, 30]);
        assert_eq!(segments.get(1).map(Segment::base_offset), Some(20));
        assert_eq!(segments.get(2).map(Segment::base_offset), Some(30));
        assert!(segments.get(3).is_none());
    }
}
