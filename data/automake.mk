# data/: the files the tests, benchmarks and demo read, in the repository
# so that a clone alone passes its tests (data/README.md says where each
# comes from).  MANIFEST lists each file with its SHA-256;
# tests/data-check.sh holds the repository to it.
DATA_FILES = $(shell sed -n 's/^[0-9a-f]\{64\}  //p' \
	$(srcdir)/data/MANIFEST 2>/dev/null)
EXTRA_DIST += data/MANIFEST data/README.md data/classbench/README.md \
	data/snort-community/README.md $(DATA_FILES)

# The build tree's data/ is what the programs read by default
# (OVSGPU_DEFAULT_DATA): classbench/ is the repository's (its readers
# decompress .gz files themselves), and the Snort community rules are
# unpacked, since gpu_ids's loader, like ovs-vswitchd's ruleset setting,
# reads a plain rules file.  A missing .gz leaves no rules file, so the
# tests fail naming it rather than the build stopping before any test.
DATA_GZ = data/snort-community/community.rules.gz
data-unpack:
	$(AM_V_at)$(MKDIR_P) data/snort-community
	$(AM_V_at)if test ! data/classbench -ef $(srcdir)/data/classbench; \
	then \
		rm -rf data/classbench; \
		ln -s $(abs_top_srcdir)/data/classbench data/classbench; \
	fi
	$(AM_V_at)for gz in $(DATA_GZ); do \
		out=`echo $$gz | sed 's/\.gz$$//'`; \
		if test ! -f $(srcdir)/$$gz; then \
			rm -f $$out; \
		elif test ! -f $$out || test $$out -ot $(srcdir)/$$gz; then \
			echo "  GUNZIP   $$gz"; \
			gzip -dc $(srcdir)/$$gz > $$out.tmp \
				&& mv $$out.tmp $$out || exit 1; \
		fi; \
	done
all-local: data-unpack
.PHONY: data-unpack
