//! A small tmpfs for full-disk faults (root only, as CI runs), unmounted when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for the test's life.
pub struct SmallDisk(PathBuf);

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`mount`'s syntax: `2m`, `64m`) at `path`, made if missing.
    pub fn mount(path: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(path).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .expect("mount");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        SmallDisk(path.to_path_buf())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Fills the disk to the last byte.
    pub fn fill(&self) {
        use std::io::Write;
        let mut file = std::fs::File::create(self.0.join("filler")).expect("filler");
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        while file.write_all(&[0]).is_ok() {}
    }

    /// Removes what [`SmallDisk::fill`] wrote.
    pub fn free(&self) {
        std::fs::remove_file(self.0.join("filler")).expect("remove filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
