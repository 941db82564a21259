"""Vocabularies: the bundled descriptors, compiling a tokenizer.json into the
arrays the native core loads, loading and caching them, model folders
(`Tokenizer.from_pretrained`) and the one regular-file reader they use."""
