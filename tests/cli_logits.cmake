# kipp logits command tests.
