-- store_id: the identity of this queue's store (Lease.origin): its meta key's value, written
-- when missing as by any first write (see touch_meta). ARGV: now (unused).
-- needs: store
touch_meta()
return redis.call('GET', META)
