//! Writes the seed corpus of the `request` target: one valid request frame (header and
//! body, no length prefix) per file, into the directory given (default `fuzz/seeds/request`).
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --bin gen_seeds [dir]`

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("seeds/request"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let seeds = highwater_fuzz::seeds();
    for (name, frame) in &seeds {
        std::fs::write(dir.join(name), frame)?;
    }
    println!("wrote {} seeds to {}", seeds.len(), dir.display());
    Ok(())
}
