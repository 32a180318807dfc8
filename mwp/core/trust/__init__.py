"""Trust: Registry evidence, the Signed Document codec (six verification stages), and First
Admission with historical trust."""
