//! The shape of the protobuf field tables: generated into [`super::protobuf_schema`], read by
//! [`super::protobuf`] to decode a message into JSON.

/// How a field maps to JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    Str,
    /// Bytes (base64 in JSON).
    Bytes,
    /// An integer.
    Int,
    /// A boolean.
    Bool,
    /// A floating point number.
    Double,
    /// A nested message (index into the message table).
    Message(usize),
    /// A map of strings.
    MapStr,
    /// A map of bytes.
    MapBytes,
    /// A map of messages.
    MapMessage(usize),
    /// A map of quantities.
    MapQuantity,
    /// A map of times.
    MapTime,
    /// A map of int-or-strings.
    MapIntOrString,
    /// A map of raw JSON.
    MapRaw,
    /// A `metav1.Time` (RFC 3339 in JSON).
    Time,
    /// A `metav1.MicroTime`.
    MicroTime,
    /// A `resource.Quantity` (its string in JSON).
    Quantity,
    /// An `intstr.IntOrString`.
    IntOrString,
    /// A `runtime.RawExtension` or `FieldsV1` (JSON bytes).
    Raw,
    /// A `metav1.Duration`.
    Duration,
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    /// Protobuf tag.
    pub tag: u64,
    /// JSON name.
    pub json: &'static str,
    /// How it maps to JSON.
    pub kind: Kind,
    /// Whether it repeats (a JSON array).
    pub repeated: bool,
}

/// A message: its fields.
#[derive(Debug)]
pub struct Message {
    /// Qualified name (for diagnostics).
    pub name: &'static str,
    /// Fields.
    pub fields: &'static [Field],
}
