//! Subscriptions by regular expression (ConsumerGroupHeartbeat's SubscribedTopicRegex):
//! RE2 syntax matched against whole topic names, as Kafka's TopicRegexResolver does with
//! RE2J, over every topic of the metadata image. Pure functions, no state.

use std::collections::{BTreeMap, BTreeSet};

use regex_automata::meta::Regex;

use crate::metadata::MetadataImage;

/// Longest regular expression accepted, in bytes (bounds the compile's work).
pub const REGEX_LENGTH_MAX: usize = 4096;

/// Compiles `pattern` to match whole topic names; `Err` explains why it is not valid.
pub fn compile(pattern: &str) -> Result<Regex, String> {
    if pattern.len() > REGEX_LENGTH_MAX {
        return Err(format!("longer than {REGEX_LENGTH_MAX} bytes"));
    }
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| e.to_string())
}

/// The topics of `image` each regular expression matches; one that does not compile
/// (refused when received, so never expected here) matches nothing.
pub fn resolve<'a>(
    regexes: impl Iterator<Item = &'a String>,
    image: &MetadataImage,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut resolved = BTreeMap::new();
    for pattern in regexes {
        if resolved.contains_key(pattern) {
            continue;
        }
        let topics = match compile(pattern) {
            Ok(regex) => image
                .topics
                .keys()
                .filter(|name| regex.is_match(name.as_str()))
                .cloned()
                .collect(),
            Err(error) => {
                tracing::error!(pattern, %error, "ignoring a regular expression that does not compile");
                BTreeSet::new()
            }
        };
        resolved.insert(pattern.clone(), topics);
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regex_matches_whole_topic_names_only() {
        // Goal: Java's Pattern.matches semantics (the whole name), not a search. Method:
        // match a prefix pattern against names that contain it elsewhere.
        let regex = compile("orders-.*").expect("valid");
        assert!(regex.is_match("orders-eu"));
        assert!(!regex.is_match("old-orders-eu"));
        assert!(compile("orders-(").is_err());
    }
}
