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
    &["log", "sasl"],
    &["metadata"],
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
