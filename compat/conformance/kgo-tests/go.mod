module highwater/compat/conformance/kgo-tests

go 1.22
