# The v2 record batch header (Kafka's DefaultRecordBatch): byte offsets of its
# fields and the bits of its attributes, for the .pyx modules that read or
# write batches in C (records, cleaner).  One copy, cimported.

cdef enum:
    OFF_BASE_OFFSET = 0
    OFF_BATCH_LENGTH = 8
    OFF_LEADER_EPOCH = 12
    OFF_MAGIC = 16
    OFF_CRC = 17
    OFF_ATTRIBUTES = 21
    OFF_LAST_OFFSET_DELTA = 23
    OFF_BASE_TIMESTAMP = 27
    OFF_MAX_TIMESTAMP = 35
    OFF_PRODUCER_ID = 43
    OFF_PRODUCER_EPOCH = 51
    OFF_BASE_SEQUENCE = 53
    OFF_RECORD_COUNT = 57
    HEADER_SIZE = 61
    # batchLength counts from partitionLeaderEpoch on: size = batchLength + 12
    LOG_OVERHEAD = 12
    MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

    ATTR_COMPRESSION_MASK = 0x07
    ATTR_TIMESTAMP_TYPE = 0x08  # LogAppendTime
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40  # the base timestamp is the delete horizon (KIP-534)
