//! Publishes metadata images to the rest of the broker: the latest image built from the
//! replicated state, stamped with the active controller as last seen. Readers take the
//! current image (an `Arc`, never a half-made change) or wait for the next one.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::state::ClusterState;
use crate::metadata::MetadataImage;

/// The image channel. Thread safety: a mutex orders publications (state and controller
/// changes come from different tasks); readers use the lock-free watch channel.
#[derive(Debug)]
pub struct Publisher {
    order: Mutex<()>,
    sender: watch::Sender<Arc<MetadataImage>>,
}

impl Default for Publisher {
    fn default() -> Self {
        let (sender, _) = watch::channel(Arc::new(MetadataImage {
            controller_id: -1,
            ..MetadataImage::default()
        }));
        Publisher {
            order: Mutex::new(()),
            sender,
        }
    }
}

impl Publisher {
    /// The current image.
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.sender.borrow())
    }

    /// A receiver that sees every later image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.sender.subscribe()
    }

    /// Publishes `state` as applied up to `offset`.
    pub fn publish_state(&self, state: &ClusterState, offset: u64) {
        let _order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        let controller_id = self.sender.borrow().controller_id;
        self.sender
            .send_replace(Arc::new(state.image(offset, controller_id)));
    }

    /// Records a new active controller (-1: none known).
    pub fn publish_controller(&self, controller_id: i32) {
        let _order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        if self.sender.borrow().controller_id == controller_id {
            return;
        }
        let mut image = MetadataImage::clone(&self.sender.borrow());
        image.controller_id = controller_id;
        self.sender.send_replace(Arc::new(image));
    }
}
