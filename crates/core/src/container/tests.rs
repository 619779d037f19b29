//! Unit tests of the container views and mapping helpers.
