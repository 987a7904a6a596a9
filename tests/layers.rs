//! The module layering of `src/lib.rs` holds (issue 17): every `crate::…` path in a
//! module's files names the module itself or one on a lower level, never a higher one nor
//! a sibling on its own level. A new upward import fails this test with its file and line.
//! And Kafka error codes are chosen in `src/api/errors.rs` alone: anywhere else, non-test
//! code may only read a code another broker sent (`ResponseError::try_from_code`).

use std::path::Path;

/// Top-level modules by level, lowest first; modules on one level are siblings.
const LEVELS: &[&[&str]] = &[
    &[
        "config",
        "clock",
        "faults",
        "log_levels",
        "metrics",
        "acl",
        "wire",
        "x500",
        "ids",
    ],
    &["log", "sasl", "tls"],
    &["metadata", "peer"],
    &["controller", "replica", "quota"],
    &["group"],
    &["txn"],
    &["api"],
    &["server", "http", "dump"],
    &["node"],
    &["testkit"],
    &["cli"],
];

fn level(module: &str) -> Option<usize> {
    LEVELS.iter().position(|l| l.contains(&module))
}

/// The module a file of `src/` belongs to (`src/replica/fetcher.rs` → `replica`).
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// Every `crate::NAME` in `text` with its line number.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push((number + 1, name));
            rest = after;
        }
    }
    found
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every file of `src/`: its path under `src/` and its text.
fn sources() -> Vec<(std::path::PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    all.iter()
        .map(|path| {
            let relative = path.strip_prefix(&src).expect("under src").to_path_buf();
            (relative, std::fs::read_to_string(path).expect("read"))
        })
        .collect()
}

#[test]
fn no_module_imports_one_above_it_or_a_sibling() {
    let mut violations = Vec::new();
    for (relative, text) in sources() {
        let relative = relative.as_path();
        let Some(module) = module_of(relative) else {
            continue;
        };
        let own = level(&module).unwrap_or_else(|| {
            panic!(
                "src/{} belongs to `{module}`, which LEVELS does not place",
                relative.display()
            )
        });
        for (line, target) in crate_paths(&text) {
            if target == module {
                continue;
            }
            let Some(theirs) = level(&target) else {
                continue; // not a module: a macro or item at the crate root
            };
            if theirs >= own {
                violations.push(format!(
                    "src/{}:{line}: `{module}` uses `crate::{target}`",
                    relative.display()
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the layering of src/lib.rs:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import() {
    // The check itself can fail: a replica file naming the api layer is caught.
    let paths = crate_paths("use crate::api::topic_name; // crate::server in a comment");
    assert_eq!(paths, vec![(1, "api".to_string())]);
    assert!(level("api") > level("replica"));
    assert_eq!(level("controller"), level("replica"), "siblings");
    let module = module_of(Path::new("replica/fetcher.rs"));
    assert_eq!(module.as_deref(), Some("replica"));
}

/// Lines of `text` before its tests that name a Kafka error other than to decode one.
fn chosen_codes(text: &str) -> Vec<usize> {
    text.lines()
        .take_while(|line| !line.trim_start().starts_with("#[cfg(test)]"))
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| {
            line.split("ResponseError::")
                .skip(1)
                .any(|rest| !rest.starts_with("try_from_code"))
        })
        .map(|(index, _)| index + 1)
        .collect()
}

#[test]
fn error_codes_are_chosen_in_api_errors_alone() {
    let mut violations = Vec::new();
    for (relative, text) in sources() {
        if relative == Path::new("api/errors.rs") {
            continue;
        }
        for line in chosen_codes(&text) {
            violations.push(format!("src/{}:{line}", relative.display()));
        }
    }
    assert!(
        violations.is_empty(),
        "Kafka error codes chosen outside src/api/errors.rs (add a Refusal or a mapping \
         there):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_check_sees_a_code_chosen_in_a_handler() {
    let handler = "let e = ResponseError::try_from_code(c);\n\
                   return Err(ResponseError::InvalidRequest);\n\
                   // ResponseError::InvalidRequest in a comment\n\
                   #[cfg(test)]\n\
                   ResponseError::UnknownTopicId";
    assert_eq!(chosen_codes(handler), vec![2]);
}

/// The files of `module` (`log` → `partition_log`, `cleaner`, …; a directory counts as one)
/// that each of its files names, before its tests: `crate::module::X`, and `super::X` in
/// the files right under `src/module/`.
fn file_graph(
    files: &[(std::path::PathBuf, String)],
    module: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let dir = Path::new(module);
    let node_of = |relative: &Path| -> Option<(String, bool)> {
        let inner = relative.strip_prefix(dir).ok()?;
        let first = inner.components().next()?.as_os_str().to_str()?;
        let name = first.strip_suffix(".rs").unwrap_or(first).to_string();
        (name != "mod").then_some((name, inner.components().count() == 1))
    };
    let nodes: std::collections::BTreeSet<String> = files
        .iter()
        .filter_map(|(relative, _)| node_of(relative).map(|(n, _)| n))
        .collect();
    let mut graph: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        std::collections::BTreeMap::new();
    for (relative, text) in files {
        let Some((node, direct)) = node_of(relative) else {
            continue;
        };
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let own = format!("crate::{module}::");
        let prefixes: &[&str] = match direct {
            true => &[own.as_str(), "super::"],
            false => &[own.as_str()],
        };
        for line in code
            .lines()
            .map(|l| l.split("//").next().unwrap_or_default())
        {
            for prefix in prefixes {
                for (at, _) in line.match_indices(prefix) {
                    let before = line[..at].chars().last();
                    if *prefix == "super::" && before.is_some_and(|c| c == ':') {
                        continue; // super::super::…, a file further down
                    }
                    let name: String = line[at + prefix.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if name != node && nodes.contains(&name) {
                        graph.entry(node.clone()).or_default().insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// A cycle of `graph`, if it has one, as the path that closes it.
fn a_cycle(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Option<Vec<String>> {
    fn visit(
        graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(graph, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn the_files_of_log_and_controller_import_each_other_without_a_cycle() {
    // Issue 17: `partition_log` ↔ `cleaner` ↔ `cleaner_swap` (and `producer_recovery`) in
    // log/, `rpc` ↔ `quorum` in controller/. Open-time recovery now sits in
    // log/recovery.rs, the configs in log/config.rs, openraft's types in
    // controller/raft_types.rs, each below the files that use them.
    let files = sources();
    for module in ["log", "controller"] {
        let graph = file_graph(&files, module);
        assert!(graph.len() > 3, "{module}: the graph was read");
        if let Some(cycle) = a_cycle(&graph) {
            panic!("src/{module}/ has an import cycle: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn the_cycle_check_sees_a_cycle() {
    let files = vec![
        (
            std::path::PathBuf::from("m/a.rs"),
            "use super::b::B; // super::c in a comment".to_string(),
        ),
        (
            std::path::PathBuf::from("m/b.rs"),
            "use crate::m::c::C;".to_string(),
        ),
        (
            std::path::PathBuf::from("m/c/mod.rs"),
            "use super::x; use crate::m::a::A;".to_string(),
        ),
        (
            std::path::PathBuf::from("m/d.rs"),
            "fn f() {}\n#[cfg(test)]\nuse super::a::A;".to_string(),
        ),
    ];
    let graph = file_graph(&files, "m");
    assert_eq!(graph.get("d"), None, "tests are not counted");
    let cycle = a_cycle(&graph).expect("a → b → c → a");
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4);
}
