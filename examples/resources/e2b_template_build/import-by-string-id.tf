# template_id/build_id. E2B does not return a build's inputs: the plan of an
# import replaces the build it imports, unless the build was made with
# reuse = true and this configuration's spec_hash is its spec tag's, when the
# plan adopts it in place (see the guide on adopting existing templates).
import {
  to = e2b_template_build.app
  id = "abcdefghij0123456789/1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
}
