"""The encode path: the Tokenizer facade, the chat encoder, masks, budgets,
token buffers, Arrow output and the batch schema."""
