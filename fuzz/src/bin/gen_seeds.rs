//! Writes the seed corpora: for the `request` target one valid request frame (header and
//! body, no length prefix) per file, into `DIR/request`; for the `sasl` target a client's
//! whole stream on a SASL listener per file, into `DIR/sasl` (DIR defaults to
//! `fuzz/seeds`).
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --bin gen_seeds [DIR]`

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("seeds"),
        PathBuf::from,
    );
    for (target, seeds) in [
        ("request", highwater_fuzz::seeds()),
        ("sasl", highwater_fuzz::sasl::seeds()),
    ] {
        let dir = dir.join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in &seeds {
            std::fs::write(dir.join(name), bytes)?;
        }
        println!("wrote {} seeds to {}", seeds.len(), dir.display());
    }
    Ok(())
}
