"""The question guard: the criticality gate for hallucination-prone questions, and the
verification loop that forces the reason tool before the model may answer."""
