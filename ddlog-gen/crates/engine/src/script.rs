//! Runs parsed `.dat` scripts against an [`crate::Engine`], printing as DDlog does.
