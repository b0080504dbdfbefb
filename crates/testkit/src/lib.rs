//! Dev-only test kit: a seeded network simulator on virtual time.
