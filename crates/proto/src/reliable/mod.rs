//! Reliability and channels inside netcode payloads (being written).
