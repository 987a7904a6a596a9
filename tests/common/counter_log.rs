//! Logs of counters: a producer writes the counters 0, 1, 2, ... in batches, one counter a
//! record as its decimal value, and the log it leaves is checked against what it sent and
//! what was acknowledged.

use std::collections::HashMap;

/// One produced batch: the global counters it carries and, if acknowledged, its offset.
#[derive(Debug, Clone)]
pub struct SentBatch {
    pub first: u64,
    pub count: u64,
    pub acked_at: Option<i64>,
}

/// Checks the fetched log against what was sent; returns how many batches that were not
/// acknowledged are stored anyway.
pub fn check_log(sent: &[SentBatch], log: &[(i64, String, String)]) -> Result<usize, String> {
    let mut at = HashMap::with_capacity(log.len());
    let mut previous: Option<u64> = None;
    for (n, (offset, _, value)) in log.iter().enumerate() {
        if *offset != n as i64 {
            return Err(format!(
                "offset {offset} at position {n}: offsets must be contiguous"
            ));
        }
        let counter: u64 = value
            .parse()
            .map_err(|_| format!("offset {offset}: value {value:?} is no counter"))?;
        if previous.is_some_and(|p| counter <= p) {
            return Err(format!(
                "offset {offset}: counter {counter} after {previous:?}: duplicated or reordered"
            ));
        }
        previous = Some(counter);
        at.insert(counter, *offset);
    }
    let mut unacked_stored = 0;
    for batch in sent {
        let offsets: Vec<Option<i64>> = (batch.first..batch.first + batch.count)
            .map(|c| at.get(&c).copied())
            .collect();
        let stored = offsets.iter().flatten().count();
        let range = format!("counters {}..{}", batch.first, batch.first + batch.count);
        if stored != 0 && stored != offsets.len() {
            return Err(format!("batch of {range} is partly stored: {offsets:?}"));
        }
        match (batch.acked_at, offsets[0]) {
            (Some(acked), Some(first)) if acked != first => {
                return Err(format!(
                    "{range} acknowledged at {acked} but stored at {first}"
                ));
            }
            (Some(acked), None) => {
                return Err(format!("{range} acknowledged at offset {acked} but lost"));
            }
            (None, Some(_)) => unacked_stored += 1,
            _ => {}
        }
    }
    let sent_max = sent.last().map_or(0, |b| b.first + b.count);
    if previous.is_some_and(|p| p >= sent_max) {
        return Err(format!("counter {previous:?} was never sent"));
    }
    Ok(unacked_stored)
}
