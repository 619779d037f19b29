//! The names of unit enums in job files and the APIs they go to: one table per enum.

/// Gives a unit enum, from one table of its values and their names, `NAMES` (for decoding and
/// suggestions) and `as_str`.
macro_rules! names {
    ($type:ident: $($variant:ident = $name:literal),+ $(,)?) => {
        impl $type {
            /// Every value with its name in job files (and in the API it goes to).
            pub const NAMES: [(&'static str, $type); [$($name),+].len()] =
                [$(($name, $type::$variant)),+];

            /// Its name in job files (and in the API it goes to).
            pub fn as_str(self) -> &'static str {
                match self {
                    $($type::$variant => $name),+
                }
            }
        }
    };
}

pub(crate) use names;
